import { sql } from "kysely";
import { AdapterError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import { TRANSITIONS, type TransitionEvent } from "../../core/transitions.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { rowToRecord, type JobRow } from "./row.ts";

/** The key of a guarded write: which job, which lease, at what time. */
export interface GuardKey {
  id?: number;
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
  q = q.where("state", "in", rule.from);
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
 * (id, lease_token) pairs as the fence, and the legal predecessor states.
 * Only for lease-fenced events. With `arrays` (PostgreSQL) the pairs are
 * two array parameters, `(id, lease_token) IN (SELECT * FROM unnest($ids, $tokens))`,
 * so a batch costs the same to plan whatever its size; otherwise a list
 * `(id, lease_token) IN ((…), …)`.
 */
// deno-lint-ignore no-explicit-any
export function guardMany<Q extends { where: (...args: any[]) => any }>(
  query: Q,
  event: TransitionEvent,
  keys: readonly { id: number; leaseToken: string }[],
  options: { arrays: boolean },
): Q {
  const rule = TRANSITIONS[event];
  if (rule.fence !== "lease") throw new AdapterError(`${event} is not fenced by a lease`);
  if (options.arrays) {
    const ids = keys.map((k) => k.id);
    const tokens = keys.map((k) => k.leaseToken);
    return query
      .where(sql<boolean>`${sql.ref("id")} = any(${ids}::bigint[])`)
      .where(sql<boolean>`(${sql.ref("id")}, ${sql.ref("lease_token")}) in (select * from unnest(${ids}::bigint[], ${tokens}::text[]))`)
      .where("state", "in", rule.from);
  }
  return query
    // The plain id list lets planners use one primary-key lookup; the pairs are the fence.
    .where("id", "in", [...new Set(keys.map((k) => k.id))])
    // deno-lint-ignore no-explicit-any
    .where((eb: any) => eb(eb.refTuple("id", "lease_token"), "in", keys.map((k) => eb.tuple(k.id, k.leaseToken))))
    .where("state", "in", rule.from);
}

/**
 * The one guarded write: `UPDATE jobs SET state = rule.to, … WHERE id = ?
 * AND state IN (rule.from) AND <fence>`, inside the caller's transaction.
 * Returns the updated record, or null when no row matched (the caller lost
 * a race or the move is illegal). With `unkeyedOnly`, a job that has a
 * concurrency key matches nothing either.
 */
export async function applyTransition(
  ctx: StoreContext,
  db: AnyDb,
  event: TransitionEvent,
  key: GuardKey & { id: number },
  set: Record<string, unknown>,
  options: { unkeyedOnly?: boolean } = {},
): Promise<JobRecord | null> {
  const values = { ...set, state: TRANSITIONS[event].to, updated_at: key.now };
  let update = guard(db.updateTable(ctx.tables.jobs).set(values), event, key);
  if (options.unkeyedOnly) update = update.where("concurrency_key", "is", null);
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
