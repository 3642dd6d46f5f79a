export * from "./harness.ts";
export { conformanceCases } from "./conformance/index.ts";
export * from "./schedule/scheduled-dialect.ts";
export * from "./model/model.ts";
export * from "./invariants.ts";
export * from "./mutations.ts";
export * from "./statement-counter.ts";
