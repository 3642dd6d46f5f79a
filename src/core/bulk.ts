import { JOB_STATES, TERMINAL_STATES, type JobState } from "./states.ts";

/**
 * The actions a bulk call applies (see Docket.bulk), each with the states
 * it applies to: a selection's state must be one of them.
 */
export const BULK_ACTIONS = {
  cancel: JOB_STATES.filter((s) => !TERMINAL_STATES.includes(s)),
  delete: TERMINAL_STATES,
  "run-now": ["scheduled"],
  replay: ["dead"],
} as const satisfies Record<string, readonly JobState[]>;

/**
 * A bulk action's name: cancel (live states), delete (finished states), run-now (scheduled) or replay (dead).
 * @useDeclaredType
 */
export type BulkAction = keyof typeof BULK_ACTIONS;

export function isBulkAction(value: unknown): value is BulkAction {
  return typeof value === "string" && Object.hasOwn(BULK_ACTIONS, value);
}

/** Why `action` cannot apply to jobs in `state` (the message every caller refuses with), or null when it can. */
export function bulkRefusal(action: BulkAction, state: JobState): string | null {
  const states: readonly JobState[] = BULK_ACTIONS[action];
  return states.includes(state) ? null : `${action} applies to ${states.join(", ")} jobs, not ${state}`;
}
