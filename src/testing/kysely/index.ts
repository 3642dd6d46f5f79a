/**
 * docket/testing/kysely: what the conformance kit offers adapters built on
 * docket's kysely store (the SQLite, PostgreSQL and MySQL adapters, or a
 * third party's on another kysely dialect): their stores and targets, the
 * kysely-only cases, the statement hooks, taps and counters on a kysely
 * driver, the scheduled dialect of the property suite, and the mutations
 * that remove one guard each. The portable kit is docket/testing.
 * @module docket/testing/kysely
 */
export * from "./harness.ts";
export { kyselyConformanceCases } from "./conformance/index.ts";
export * from "./statement-hook.ts";
export * from "./statement-counter.ts";
export * from "./tapped-driver.ts";
export * from "./scheduled-dialect.ts";
export * from "./mutations.ts";
export type { StatementLabel } from "../../adapters/kysely/labels.ts";
export type { AnyDb, Capabilities, Engine, InstrumentOptions, Migration } from "../../adapters/kysely/engine.ts";
