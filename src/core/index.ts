export * from "./states.ts";
export * from "./transitions.ts";
export * from "./errors.ts";
export * from "./clock.ts";
export * from "./retry.ts";
export * from "./job.ts";
export type * from "./adapter.ts";
export * from "./docket.ts";
export * from "./worker.ts";
