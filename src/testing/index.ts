/**
 * docket/testing: the portable conformance kit, on `DocketAdapter` alone
 * (no SQL, no query builder, no driver): the harness, every portable case,
 * the reference model, the invariants and the statement scheduler of the
 * property suite. Adapters built on docket's SQL store add the kit's SQL
 * entry beside this one (package.json "exports").
 * @module docket/testing
 */
export * from "./harness.ts";
export { conformanceCases } from "./conformance/index.ts";
export * from "./schedule/statement-scheduler.ts";
export * from "./model/model.ts";
export * from "./invariants.ts";
