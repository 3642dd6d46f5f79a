/** The worker runtime's public surface: the Worker class, its options, events and handler types. */
export { Worker } from "./worker.ts";
export type { WorkerOptions } from "./options.ts";
export type { WorkerEvent, WorkerOperation } from "./emitter.ts";
export { type Handler, type JobContext } from "./executor.ts";
export { JobLeaseLostError, JobTimeoutError, WorkerStoppingError } from "./abort-reasons.ts";
export type { TransactionFunction, TransactionOptions } from "./transaction.ts";
export type { WorkerLogger } from "./log.ts";
export type { StepFunction } from "./steps.ts";
export { STOPPABLE_SIGNALS, type ShutdownSignal } from "./signals.ts";
export { describeThrown } from "../core/thrown.ts";
