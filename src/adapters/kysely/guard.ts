import { sql } from "kysely";
import { AdapterError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import { TRANSITIONS, type TransitionEvent } from "../../core/transitions.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import type { Slot } from "./compiled.ts";
import { rowToRecord, type JobRow } from "./row.ts";
import { labelled } from "./labels.ts";

/**
 * A rule's states as SQL literals, not parameters: they are constants of the
 * transition table, and a plan made without the parameters' values (a
 * PostgreSQL generic plan of a prepared statement) can then use the partial
 * indexes that hold only those states.
 */
function stateLiterals(states: readonly string[]) {
  return states.map((s) => sql.lit(s));
}

/**
 * `state = '<s>'` for the one state `event` moves jobs from, as a literal:
 * SQLite uses a partial index (`WHERE state = 'ready' AND …`) only for a
 * query that names its state with `=`; `state IN ('ready')`, the guard's
 * form, does not qualify, and a fair claim behind 100,000 ready jobs then
 * sorted all of them at every claim. The same test as the guard's, so
 * adding it to a guarded read changes no result on any engine.
 */
export function oneStateLiteral(event: TransitionEvent) {
  const from = TRANSITIONS[event].from;
  if (from.length !== 1) throw new AdapterError(`${event} moves jobs from ${from.length} states, not one`);
  return sql<boolean>`${sql.ref("state")} = ${sql.lit(from[0])}`;
}

/**
 * The legal-states test of a write that names its jobs by id, as
 * `coalesce(state, '') IN (…)`: the same test (state is never null), but no
 * partial index's predicate follows from it, so the engine reaches the rows
 * through the primary key. From `state IN ('running')` PostgreSQL took a
 * completion batch (`id = ANY($ids) AND state = 'running'`) through the
 * partial index of running jobs, which its statistics call tiny; under a
 * held snapshot that index keeps an entry for every job that ever ran, and
 * the write read them all: 375 ms for 50 completions after 100 s at 2,000
 * jobs/s (bench/horizon.ts), the main cost of a held horizon.
 */
// deno-lint-ignore no-explicit-any
function byIdInStates<Q extends { where: (...args: any[]) => any }>(query: Q, states: readonly string[]): Q {
  // deno-lint-ignore no-explicit-any
  return query.where((eb: any) => eb(eb.fn.coalesce("state", sql.lit("")), "in", stateLiterals(states)));
}

/** The key of a guarded write: which job, which lease, at what time. */
export interface GuardKey {
  id?: number;
  /** The query names its rows by id in a clause of its own (a list or a subquery): the states are tested as with `id` (see byIdInStates). */
  byId?: boolean;
  leaseToken?: string;
  now: number;
}

/**
 * Adds the WHERE clause that the core transition table prescribes for
 * `event`: the job id (when given), the legal predecessor states and the
 * rule's fence. Every state change goes through this or `guardMany`.
 */
// deno-lint-ignore no-explicit-any
export function guard<Q extends { where: (...args: any[]) => any }>(query: Q, event: TransitionEvent, key: GuardKey): Q {
  const rule = TRANSITIONS[event];
  let q = query;
  if (key.id !== undefined) q = q.where("id", "=", key.id);
  q = key.id !== undefined || key.byId ? byIdInStates(q, rule.from) : q.where("state", "in", stateLiterals(rule.from));
  switch (rule.fence) {
    case "none":
      break;
    case "due":
      q = q.where("run_at", "<=", key.now);
      break;
    case "lease":
      q = q.where("lease_token", "=", requireToken(key, event));
      break;
    case "expired":
      q = q.where("lease_token", "=", requireToken(key, event)).where("lease_expires_at", "<=", key.now);
      break;
  }
  return q;
}

/**
 * Adds the WHERE clause of `event` for many jobs at once: the job ids, the
 * fence, and the legal predecessor states. The fence groups the keys by
 * token: `lease_token = ?` when all hold one (a batch from one claim, the
 * common case), else `(lease_token = ? AND id IN (…)) OR …`, one term per
 * token. Only for lease-fenced events. With `arrays` (PostgreSQL) each id
 * list is one array parameter (`id = ANY($ids)`), so a batch costs the same
 * to plan whatever its size.
 *
 * Not `(id, lease_token) IN (SELECT * FROM unnest($ids, $tokens))`:
 * PostgreSQL planned that as a nested-loop semi-join that rescans the pairs
 * per row, 45,000 comparisons for a batch of 300 (10.5 ms against 2.7 ms).
 */
// deno-lint-ignore no-explicit-any
export function guardMany<Q extends { where: (...args: any[]) => any }>(
  query: Q,
  event: TransitionEvent,
  keys: readonly { id: number; leaseToken: string }[],
  options: { arrays: boolean },
): Q {
  const byToken = new Map<string, number[]>();
  for (const k of keys) {
    const ids = byToken.get(k.leaseToken);
    if (ids) ids.push(k.id);
    else byToken.set(k.leaseToken, [k.id]);
  }
  const all = [...new Set(keys.map((k) => k.id))];
  if (byToken.size === 1) return guardOneToken(query, event, all, keys[0]!.leaseToken, options);
  const rule = leaseRule(event);
  // deno-lint-ignore no-explicit-any
  const idIn = (eb: any, ids: readonly number[]) => (options.arrays ? sql<boolean>`${sql.ref("id")} = any(${ids}::bigint[])` : eb("id", "in", ids));
  return byIdInStates(
    query
      // deno-lint-ignore no-explicit-any
      .where((eb: any) => idIn(eb, all))
      // deno-lint-ignore no-explicit-any
      .where((eb: any) => eb.or([...byToken].map(([token, ids]) => eb.and([eb("lease_token", "=", token), idIn(eb, [...new Set(ids)])])))),
    rule.from,
  );
}

/**
 * `guardMany` for keys that all hold `token`: `id IN (ids) AND lease_token = ?`.
 * `ids` and `token` may be slots of a statement compiled once (see
 * `compiledOnce`); a slot for `ids` needs `arrays` (it is one parameter).
 */
// deno-lint-ignore no-explicit-any
export function guardOneToken<Q extends { where: (...args: any[]) => any }>(
  query: Q,
  event: TransitionEvent,
  ids: readonly number[] | Slot,
  token: string | Slot,
  options: { arrays: boolean },
): Q {
  const rule = leaseRule(event);
  if (!options.arrays && !Array.isArray(ids)) throw new AdapterError("an id list slot needs array parameters");
  const byId = options.arrays ? query.where(sql<boolean>`${sql.ref("id")} = any(${ids}::bigint[])`) : query.where("id", "in", ids);
  return byIdInStates(byId.where("lease_token", "=", token), rule.from);
}

/** The transition rule of `event`, which must be fenced by a lease. */
function leaseRule(event: TransitionEvent) {
  const rule = TRANSITIONS[event];
  if (rule.fence !== "lease") throw new AdapterError(`${event} is not fenced by a lease`);
  return rule;
}

/**
 * The one guarded write: `UPDATE jobs SET state = rule.to, … WHERE id = ?
 * AND state IN (rule.from) AND <fence>`, inside the caller's transaction.
 * Returns the updated record, or null when no row matched (the caller lost
 * a race or the move is illegal). With `unkeyedOnly`, a job that has a
 * concurrency key matches nothing either; with `childlessOnly`, a job
 * marked as having children (see dependencies.ts `childless`).
 */
export async function applyTransition(
  ctx: StoreContext,
  db: AnyDb,
  event: TransitionEvent,
  key: GuardKey & { id: number },
  set: Record<string, unknown>,
  options: { unkeyedOnly?: boolean; childlessOnly?: boolean } = {},
): Promise<JobRecord | null> {
  const values = { ...set, state: TRANSITIONS[event].to, updated_at: key.now };
  let update = labelled(guard(db.updateTable(ctx.tables.jobs).set(values), event, key), event);
  if (options.unkeyedOnly) update = update.where("concurrency_key", "is", null);
  if (options.childlessOnly) update = update.where("has_children", "=", sql.lit(0));
  if (ctx.engine.capabilities.returning) {
    const row = (await update.returningAll().executeTakeFirst()) as JobRow | undefined;
    return row ? rowToRecord(row) : null;
  }
  const result = await update.executeTakeFirst();
  if (Number(result.numUpdatedRows) === 0) return null;
  const row = (await db.selectFrom(ctx.tables.jobs).selectAll().where("id", "=", key.id).executeTakeFirst()) as JobRow | undefined;
  return row ? rowToRecord(row) : null;
}

function requireToken(key: GuardKey, event: TransitionEvent): string {
  if (typeof key.leaseToken !== "string") throw new AdapterError(`${event} needs a lease token`);
  return key.leaseToken;
}
