import { JOB_STATES } from "../../core/states.ts";

/**
 * `state IN (...)` for the CHECK constraint, built from the core state list.
 * A migration that shipped keeps its text: changing JOB_STATES needs a new
 * migration that replaces the constraint.
 */
export function stateCheck(column = "state"): string {
  return `${column} IN (${JOB_STATES.map((s) => `'${s}'`).join(", ")})`;
}

/** `state IN (...)` for a subset of states, for partial indexes. */
export function stateIn(states: readonly string[], column = "state"): string {
  return `${column} IN (${states.map((s) => `'${s}'`).join(", ")})`;
}
