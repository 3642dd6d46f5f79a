export * from "./core/index.ts";
export * from "./client/index.ts";
export type { DashboardAction, DashboardHandler, DashboardOptions } from "./dashboard/index.ts";
export * from "./worker/index.ts";
