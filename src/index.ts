/**
 * The main entry, `docket`: the `Docket` client, the worker, the job and
 * event types, the errors, and the adapter contract every store implements.
 * @module docket
 */
export * from "./core/index.ts";
export * from "./client/index.ts";
export type { DashboardAction, DashboardHandler, DashboardOptions } from "./dashboard/index.ts";
export * from "./worker/index.ts";
