import { sql, type Expression } from "kysely";
import type { TransitionEvent } from "../../core/transitions.ts";

/**
 * What a labelled statement does: a guarded write is labelled with its
 * transition event; the others name their step. Labels never change what a
 * statement does; they let a reader of the SQL (a log, `pg_stat_activity`,
 * docket/testing/kysely's statement hooks) tell docket's statements apart
 * without parsing them.
 */
export type StatementLabel =
  | TransitionEvent
  /** An INSERT of jobs (every enqueue path). */
  | "enqueue"
  /** An enqueue's locking read of the stored parents its jobs name (EnqueueOptions.after). */
  | "lock-parents"
  /** An enqueue's writes of its dependency edges, its children's counts and its parents' mark. */
  | "enqueue-deps"
  /** The read of the edges of jobs a write just ended, before their cascade cancels the waiting children. */
  | "settle-children"
  /** The cancel of the waiting descendants of a job that ended dead or cancelled. */
  | "cancel-children"
  /** The read of a concurrency key's limit that starts its rebalance. */
  | "rebalance"
  /** repairKeys' unlocked read of the keys that have blocked jobs. */
  | "repair-keys"
  /** The lock (or upsert) of several concurrency keys' rows, in name order, by a bulk admission or outcome batch. */
  | "lock-keys"
  /** The count of several keys' slot holders (and which have due scheduled jobs), under their locks, before a bulk admission or promotion. */
  | "key-holders"
  /** A bulk promotion's read of the blocked jobs of the keys with free slots. */
  | "promote-pick"
  /** A capped claim's candidate SELECT, after the caps' running counts. */
  | "claim-candidates"
  /** A floored claim's unlocked read of the ids of its window, before their rows are locked by id (controls-claim.ts readWindows). */
  | "claim-window"
  /** The unlocked read of a one-queue claim's first ready job below its floor (claim-floor.ts). */
  | "claim-floor-check"
  /** A schedule's tick write (compare-and-set on last_tick). */
  | "tick"
  /** A claim's lock of the rate keys its candidates name, with their limits and logs. */
  | "rate-lock"
  /** A claim's rewrite of a rate limit's log of starts, under the limit's lock. */
  | "rate-log"
  /** The locked read of a debounce key's pending job, before an enqueue merges into it (or inserts the key's next job). */
  | "debounce-find"
  /** An enqueue's upsert of the fairness keys its jobs name (weight; its last tag advanced), which locks their rows; RETURNING their last tags where the engine can. */
  | "fair-store"
  /** An enqueue's locking read of its fairness keys' last tags, after their upsert (engines without RETURNING). */
  | "fair-keys"
  /** A claim's read of a prioritized fair queue's keys' best jobs (`FOR UPDATE SKIP LOCKED`). */
  | "fair-best"
  /** A claim's write of the tags of a prioritized fair queue's jobs it read and left. */
  | "fair-retag"
  /** A staging's locked read of the fairness keys of the due jobs it places, and its write of their last tags. */
  | "fair-stage-keys"
  /** A write of the rows whose locks a transaction relies on, where locks are local to a server (guard-writes.ts). */
  | "guard-write";

/** The comment a statement labelled `label` carries: `/* docket:<label> *\/`. */
export function labelComment(label: StatementLabel): string {
  return `/* docket:${label} */`;
}

/**
 * `query` with its label appended as a trailing comment (kysely's
 * `modifyEnd`). Trailing, not leading: the statement still starts with its
 * keyword for whatever reads it by its first word (a pooler, a test).
 * PostgreSQL, MariaDB and SQLite accept a comment there, prepared or not.
 */
// deno-lint-ignore no-explicit-any
export function labelled<Q extends { modifyEnd(modifier: Expression<any>): Q }>(query: Q, label: StatementLabel): Q {
  return query.modifyEnd(sql.raw(labelComment(label)));
}
