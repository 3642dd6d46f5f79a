/**
 * Fair sharing in storage: a fair queue's keys are rows `(queue, name,
 * weight, served, used, active)`; the rule that orders and advances them is
 * the core's (core/fairness.ts). A claim takes the rows of the keys it
 * serves `FOR UPDATE SKIP LOCKED` (where the engine has row locks; SQLite
 * has one writer), so concurrent claimers serve different keys and none
 * waits for another's keys (R21); it writes their turn states back in one
 * statement in its transaction. `active` keeps keys without live jobs out
 * of the claims' scan: a claim clears it only when the key has no job that
 * is scheduled, ready, blocked or running (checked in the guarded UPDATE,
 * under the key row's lock), and every enqueue of the key writes it again
 * (always a write, never read-and-skip, so it waits for a claim holding the
 * row), as does a replay of one of its jobs.
 */
import { sql, type ExpressionBuilder } from "kysely";
import type { NewJob } from "../../core/adapter.ts";
import { IMPLICIT_FAIR_KEY, type FairTurn } from "../../core/fairness.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { labelled } from "./labels.ts";

/** The live states: a key with a job in one of them stays active. */
const LIVE_STATES = ["scheduled", "ready", "blocked", "running"];

/**
 * Stores the fairness keys a batch names (the last job's weight for a key
 * named twice), active, in one statement in (queue, name) order; marks
 * their queues fair first (a queue newly marked gets its implicit key's
 * row too). Inside the enqueue's transaction.
 */
export async function storeFairKeys(ctx: StoreContext, db: AnyDb, jobs: readonly NewJob[]): Promise<void> {
  const weights = new Map<string, { queue: string; name: string; weight: number }>();
  for (const j of jobs) if (j.fairness) weights.set(JSON.stringify([j.queue, j.fairness.key]), { queue: j.queue, name: j.fairness.key, weight: j.fairness.weight });
  if (weights.size === 0) return;
  const { tables, engine } = ctx;
  const queues = [...new Set([...weights.values()].map((w) => w.queue))].sort();
  // The flag only ever goes from 0 to 1: a queue read as marked needs no write.
  const marked = new Set(((await db.selectFrom(tables.queues).select("name").where("name", "in", queues).where("fair", "=", 1).execute()) as { name: string }[]).map((r) => r.name));
  for (const queue of queues) {
    if (marked.has(queue)) continue;
    const insert = db.insertInto(tables.queues).values({ name: queue, paused: 0, max_running: null, fair: 1 });
    await (engine.capabilities.onConflict ? insert.onConflict((oc) => oc.column("name").doUpdateSet({ fair: 1 })) : insert.onDuplicateKeyUpdate({ fair: 1 })).execute();
    weights.set(JSON.stringify([queue, IMPLICIT_FAIR_KEY]), { queue, name: IMPLICIT_FAIR_KEY, weight: 1 });
  }
  const rows = [...weights.values()]
    .sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((w) => ({ ...w, served: 0, used: 0, active: 1 }));
  const insert = db.insertInto(tables.fairKeys).values(rows);
  const upsert = engine.capabilities.onConflict
    ? insert.onConflict((oc) => oc.columns(["queue", "name"]).doUpdateSet({ weight: (eb: ExpressionBuilder<any, any>) => eb.ref("excluded.weight"), active: 1 }))
    : insert.onDuplicateKeyUpdate({ weight: sql`values(weight)`, active: 1 });
  await labelled(upsert, "fair-store").execute();
}

/**
 * Up to `limit` active keys of `queue` not in `except`, in serving order
 * (served, then name), locked `FOR UPDATE SKIP LOCKED` where the engine has
 * row locks: a key another claim holds is passed over.
 */
export async function lockFairKeys(ctx: StoreContext, db: AnyDb, queue: string, limit: number, except: readonly string[]): Promise<FairTurn[]> {
  let q = db
    .selectFrom(ctx.tables.fairKeys)
    .select(["name", "weight", "served", "used"])
    .where("queue", "=", queue)
    .where("active", "=", 1)
    .orderBy("served")
    .orderBy("name")
    .limit(limit);
  if (except.length > 0) q = q.where("name", "not in", [...except]);
  if (ctx.engine.capabilities.skipLocked) q = q.forUpdate().skipLocked();
  const rows = (await labelled(q, "fair-keys").execute()) as { name: string; weight: unknown; served: unknown; used: unknown }[];
  return rows.map((r) => ({ key: r.name, weight: Number(r.weight), served: Number(r.served), used: Number(r.used) }));
}

/** The largest `served` of `queue`'s keys (0 when none): new positions go after it. */
export async function maxServed(ctx: StoreContext, db: AnyDb, queue: string): Promise<number> {
  const r = await db
    .selectFrom(ctx.tables.fairKeys)
    .select((eb: ExpressionBuilder<any, any>) => eb.fn.max("served").as("m"))
    .where("queue", "=", queue)
    .executeTakeFirst();
  return Number(r?.m ?? 0);
}

/** Writes the turn states of `turns` (keys of `queue` this transaction holds) in one UPDATE. */
export async function writeTurns(ctx: StoreContext, db: AnyDb, queue: string, turns: readonly FairTurn[]): Promise<void> {
  if (turns.length === 0) return;
  const cases = (column: "served" | "used") =>
    // The values are integers the core computed, written as literals: a parameter there is text to PostgreSQL.
    sql`case ${sql.join(turns.map((t) => sql`when ${sql.ref("name")} = ${t.key} then ${sql.lit(Math.trunc(t[column]))}`), sql` `)} end`;
  const update = db
    .updateTable(ctx.tables.fairKeys)
    .set({ served: cases("served"), used: cases("used") })
    .where("queue", "=", queue)
    .where("name", "in", turns.map((t) => t.key));
  await labelled(update, "fair-serve").execute();
}

/**
 * Clears `active` of those of `names` (keys of `queue` this transaction
 * holds, never the implicit key) that have no live job, as the UPDATE
 * itself reads them.
 */
export async function deactivateIdle(ctx: StoreContext, db: AnyDb, queue: string, names: readonly string[]): Promise<void> {
  const keys = names.filter((n) => n !== IMPLICIT_FAIR_KEY);
  if (keys.length === 0) return;
  const { tables } = ctx;
  await db
    .updateTable(tables.fairKeys)
    .set({ active: 0 })
    .where("queue", "=", queue)
    .where("name", "in", keys)
    .where((eb: ExpressionBuilder<any, any>) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom(`${tables.jobs} as lj`)
            .select(sql<number>`1`.as("one"))
            .where("lj.queue", "=", queue)
            .where("lj.fair_key", "=", sql.ref(`${tables.fairKeys}.name`))
            .where("lj.state", "in", LIVE_STATES),
        ),
      ),
    )
    .execute();
}

/** Sets `active` again, in one UPDATE, on the fairness keys of the jobs `ids` (a replay made them ready). */
export async function reactivateKeysOf(ctx: StoreContext, db: AnyDb, ids: readonly number[]): Promise<void> {
  if (ids.length === 0) return;
  const { tables } = ctx;
  await db
    .updateTable(tables.fairKeys)
    .set({ active: 1 })
    .where("active", "=", 0)
    .where((eb: ExpressionBuilder<any, any>) =>
      eb.exists(
        eb
          .selectFrom(`${tables.jobs} as rj`)
          .select(sql<number>`1`.as("one"))
          .where("rj.id", "in", [...ids])
          .where("rj.queue", "=", sql.ref(`${tables.fairKeys}.queue`))
          .where("rj.fair_key", "=", sql.ref(`${tables.fairKeys}.name`)),
      ),
    )
    .execute();
}
