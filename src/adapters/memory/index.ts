/** The in-process adapter (no database); `docket/memory` (src/memory.ts) exports it with the `drain` test helper. */
export { memoryAdapter, MemoryAdapter } from "./memory-adapter.ts";
