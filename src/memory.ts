/**
 * The `docket/memory` entry: the in-process adapter (no database) and the test helper that drains a docket's jobs.
 * @module docket/memory
 */
export { memoryAdapter, MemoryAdapter } from "./adapters/memory/index.ts";
export { drain, type DrainOptions, type DrainResult, type DrainSource } from "./client/drain.ts";
