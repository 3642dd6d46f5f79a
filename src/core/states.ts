/**
 * The job states, as one list. Every migration mirrors this list in a CHECK
 * constraint on the state column; `isJobState` is the runtime validator.
 */
export const JOB_STATES = [
  "waiting",
  "scheduled",
  "ready",
  "blocked",
  "running",
  "succeeded",
  "dead",
  "cancelled",
] as const;

export type JobState = (typeof JOB_STATES)[number];

/**
 * A waiting job has parents (EnqueueOptions.after) that have not all
 * succeeded: it holds no slot, is never claimed, and moves to scheduled in
 * the transaction that records its last parent's success (I15).
 */
export const WAITING_STATE = "waiting" as const;

/** States a job never leaves except by an explicit replay (dead only). */
export const TERMINAL_STATES: readonly JobState[] = ["succeeded", "dead", "cancelled"];

/**
 * States that hold a slot of the job's concurrency key: a job is admitted
 * (ready) or running. For every key K, the jobs of K in these states never
 * exceed K's limit; blocked jobs wait for a slot.
 */
export const SLOT_HOLDING_STATES: readonly JobState[] = ["ready", "running"];

export function isJobState(value: unknown): value is JobState {
  return typeof value === "string" && (JOB_STATES as readonly string[]).includes(value);
}
