/**
 * The job states as schema version 1 stored them in its CHECK constraint.
 * A migration that shipped keeps its text, so the migrations build their
 * state check from this list, never from the core's JOB_STATES: adding a
 * state to JOB_STATES needs a new migration that replaces the constraint
 * (test/migrations-frozen.test.ts fails until there is one).
 */
export const SCHEMA_V1_STATES = ["scheduled", "ready", "blocked", "running", "succeeded", "dead", "cancelled"] as const;

/** `state IN (...)` for the CHECK constraint of schema version 1 (see SCHEMA_V1_STATES). */
export function stateCheck(column = "state"): string {
  return stateIn(SCHEMA_V1_STATES, column);
}

/**
 * The job states since dependencies (the migration that added `waiting`:
 * PostgreSQL and MariaDB 19, SQLite 20). Frozen like SCHEMA_V1_STATES: a
 * later state needs a list of its own and a migration.
 */
export const SCHEMA_WAITING_STATES = ["waiting", ...SCHEMA_V1_STATES] as const;

/** `state IN (...)` for the CHECK constraint since dependencies (see SCHEMA_WAITING_STATES). */
export function waitingStateCheck(column = "state"): string {
  return stateIn(SCHEMA_WAITING_STATES, column);
}

/** `state IN (...)` for a subset of states, for partial indexes. */
export function stateIn(states: readonly string[], column = "state"): string {
  return `${column} IN (${states.map((s) => `'${s}'`).join(", ")})`;
}
