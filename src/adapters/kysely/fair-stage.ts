/**
 * Due scheduled jobs of fair queues (delayed, retried, replayed) take new
 * places when they become ready, not the places they got when enqueued: a
 * key that scheduled a burst for one moment then goes round with the keys
 * that were waiting (core/fairness.ts). A job with a concurrency key keeps
 * its place: its key admits it (through `rebalance`) one slot at a time.
 */
import { sql, type ExpressionBuilder } from "kysely";
import { IMPLICIT_FAIR_KEY, fairTags } from "../../core/fairness.ts";
import { TRANSITIONS } from "../../core/transitions.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { clockOf } from "./fairness.ts";
import { guard, oneStateLiteral } from "./guard.ts";
import { inClaimOrder } from "./row.ts";
import { labelled } from "./labels.ts";

/** Most keys, and most jobs, one staging of fair jobs takes; the rest wait for the next. */
const STAGE_KEYS = 100;
const STAGE_JOBS = 1000;

/** `state = 'scheduled'` (the stage rule's one source state) as a literal, for SQLite's index of scheduled jobs (see oneStateLiteral). */
export const STAGEABLE_LITERAL = oneStateLiteral("stage");

/** Due scheduled jobs without a concurrency key: `tagged`, those of fair queues (with a place), or the others. */
// deno-lint-ignore no-explicit-any
export function dueUnkeyed<Q extends { where: (...args: any[]) => any }>(q: Q, now: number, tagged: boolean): Q {
  return q
    .where(STAGEABLE_LITERAL)
    .where("run_at", "<=", now)
    .where("concurrency_key", "is", null)
    .where("fair_tag", tagged ? "is not" : "is", null);
}

/**
 * Stages due unkeyed jobs of fair queues at new places, in one transaction:
 * their keys' rows are locked first (in (queue, name) order, as enqueues
 * lock them), then the jobs (rows other stagers hold are skipped); each
 * key, its jobs in claim order, advances from its last tag or the queue's
 * clock (read now, not the enqueues' cached one) by its stored weight's
 * step per job, and its last tag is written.
 * A job whose key has no row keeps its place. Reads first: nothing is
 * written when no such job is due.
 */
export async function stageFairDue(ctx: StoreContext, now: number): Promise<void> {
  const { db, tables, engine } = ctx;
  const found = (await dueUnkeyed(db.selectFrom(tables.jobs).select(["queue", "fair_key"]).distinct(), now, true)
    .limit(STAGE_KEYS)
    .execute()) as { queue: string; fair_key: string | null }[];
  if (found.length === 0) return;
  const byQueue = new Map<string, Set<string>>();
  for (const r of found) byQueue.set(r.queue, (byQueue.get(r.queue) ?? new Set()).add(r.fair_key ?? IMPLICIT_FAIR_KEY));
  await engine.writeTransaction(db, async (trx) => {
    const keys = new Map<string, { weight: number; served: number }>();
    for (const queue of [...byQueue.keys()].sort()) {
      let q = trx.selectFrom(tables.fairKeys).select(["name", "weight", "served"]).where("queue", "=", queue).where("name", "in", [...byQueue.get(queue)!]).orderBy("name");
      if (engine.capabilities.rowLocks) q = q.forUpdate();
      for (const r of (await labelled(q, "fair-stage-keys").execute()) as { name: string; weight: unknown; served: unknown }[]) {
        keys.set(JSON.stringify([queue, r.name]), { weight: Number(r.weight), served: Number(r.served) });
      }
    }
    const fairKeyOf = (eb: ExpressionBuilder<any, any>) => eb.fn.coalesce("fair_key", sql.lit(IMPLICIT_FAIR_KEY));
    let jobs = guard(trx.selectFrom(tables.jobs).select(["id", "queue", "fair_key"]), "stage", { now })
      .where("concurrency_key", "is", null)
      .where("fair_tag", "is not", null)
      .where((eb) => eb.or([...byQueue].map(([queue, names]) => eb.and([eb("queue", "=", queue), eb(fairKeyOf(eb), "in", [...names])]))));
    jobs = inClaimOrder(jobs).limit(STAGE_JOBS);
    if (engine.capabilities.skipLocked) jobs = jobs.forUpdate().skipLocked();
    const rows = (await jobs.execute()) as { id: unknown; queue: string; fair_key: string | null }[];
    if (rows.length === 0) return;
    const groups = new Map<string, number[]>();
    for (const r of rows) {
      const key = JSON.stringify([r.queue, r.fair_key ?? IMPLICIT_FAIR_KEY]);
      groups.set(key, [...(groups.get(key) ?? []), Number(r.id)]);
    }
    const tags = new Map<number, number>();
    const clocks = new Map<string, number>();
    for (const [key, ids] of [...groups].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      const stored = keys.get(key);
      if (stored === undefined) continue;
      const [queue, name] = JSON.parse(key) as [string, string];
      if (!clocks.has(queue)) clocks.set(queue, await clockOf(ctx, trx, queue, true));
      const placed = fairTags(stored.served, clocks.get(queue)!, ids.map(() => stored.weight));
      ids.forEach((id, k) => tags.set(id, placed.tags[k]!));
      await labelled(trx.updateTable(tables.fairKeys).set({ served: placed.last }).where("queue", "=", queue).where("name", "=", name), "fair-stage-keys").execute();
    }
    await writeStaged(ctx, trx, rows.map((r) => Number(r.id)), tags, now);
    // Other processes' claims may have passed over these rows while this transaction held them: they are told.
    await engine.announceReady(trx, [...new Set(rows.map((r) => r.queue))].map((queue) => ({ queue, due: false })));
  });
}

/** Stages `ids` (guarded), each in `tags` at its new place. */
async function writeStaged(ctx: StoreContext, db: AnyDb, ids: number[], tags: ReadonlyMap<number, number>, now: number): Promise<void> {
  const placed = ids.filter((id) => tags.has(id));
  const tag = placed.length === 0 ? sql.ref("fair_tag") : sql`case ${sql.ref("id")} ${sql.join(placed.map((id) => sql`when ${id} then ${tags.get(id)!}`), sql` `)} else ${sql.ref("fair_tag")} end`;
  await labelled(guard(db.updateTable(ctx.tables.jobs).set({ state: TRANSITIONS.stage.to, updated_at: now, fair_tag: tag }).where("id", "in", ids), "stage", { now, byId: true }), "stage").execute();
}
