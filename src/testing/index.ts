export * from "./harness.ts";
export { conformanceCases } from "./conformance/index.ts";
