/** The `docket/memory` entry: the in-process adapter (no database) and the test helper that drains its jobs. */
export { memoryAdapter, MemoryAdapter } from "./memory-adapter.ts";
export { drain, type DrainOptions, type DrainResult } from "./drain.ts";
