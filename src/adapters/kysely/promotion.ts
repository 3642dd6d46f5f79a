import { sql, type ExpressionBuilder } from "kysely";
import { SLOT_HOLDING_STATES } from "../../core/states.ts";
import { TRANSITIONS } from "../../core/transitions.ts";
import { byClaimOrder } from "../../core/claim-order.ts";
import { freeSlots } from "../../core/concurrency.ts";
import type { AnyDb } from "./engine.ts";
import { BATCH_ROWS, type StoreContext } from "./context.ts";
import { guard } from "./guard.ts";
import { inClaimOrder } from "./row.ts";
import { labelled } from "./labels.ts";

/*
 * Concurrency keys in bulk: many keys locked, counted and promoted with a
 * bounded number of statements, whatever the number of keys and jobs. The
 * per-key forms (lockKey, rebalance) are in admission.ts; both keep the
 * same lock order (a transaction that locks several keys locks them in
 * name order, in one statement), so they cannot deadlock each other.
 */

/** Keys per statement of a bulk read (two UNION branches each: SQLite allows 500 per compound SELECT). */
const KEYS_PER_PICK = 100;

/**
 * Locks the rows of keys `names` for the rest of the transaction, in name
 * order, with one statement per BATCH_ROWS keys; returns each existing
 * key's stored limit. Without row locks (SQLite) the single writer already
 * serializes: the limits are read.
 */
export async function lockKeys(ctx: StoreContext, db: AnyDb, names: readonly string[]): Promise<Map<string, number>> {
  const limits = new Map<string, number>();
  const sorted = [...new Set(names)].sort();
  for (let i = 0; i < sorted.length; i += BATCH_ROWS) {
    let q = db
      .selectFrom(ctx.tables.keys)
      .select(["name", "max_holders"])
      .where("name", "in", sorted.slice(i, i + BATCH_ROWS))
      .orderBy("name");
    if (ctx.engine.capabilities.rowLocks) q = q.forUpdate();
    for (const r of (await labelled(q, "lock-keys").execute()) as { name: string; max_holders: number | string }[]) limits.set(r.name, Number(r.max_holders));
  }
  return limits;
}

/**
 * Creates each key of `limits` or sets its stored limit, locking its row
 * for the rest of the transaction: one INSERT … ON CONFLICT/ON DUPLICATE KEY
 * UPDATE per BATCH_ROWS keys, rows in name order (the lock order).
 */
export async function upsertKeys(ctx: StoreContext, db: AnyDb, limits: ReadonlyMap<string, number>): Promise<void> {
  const rows = [...limits].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([name, max_holders]) => ({ name, max_holders }));
  for (let i = 0; i < rows.length; i += BATCH_ROWS) {
    const insert = db.insertInto(ctx.tables.keys).values(rows.slice(i, i + BATCH_ROWS));
    const upsert = ctx.engine.capabilities.onConflict
      ? insert.onConflict((oc) => oc.column("name").doUpdateSet({ max_holders: sql`excluded.max_holders` }))
      : insert.onDuplicateKeyUpdate({ max_holders: sql`values(max_holders)` });
    await labelled(upsert, "lock-keys").execute();
  }
}

/** How many jobs of each key of `names` hold a slot (SLOT_HOLDING_STATES); one statement per BATCH_ROWS keys. Call under the keys' locks. */
export async function countHoldersOf(ctx: StoreContext, db: AnyDb, names: readonly string[]): Promise<Map<string, number>> {
  const holders = new Map<string, number>(names.map((n) => [n, 0]));
  for (let i = 0; i < names.length; i += BATCH_ROWS) {
    const q = db
      .selectFrom(ctx.tables.jobs)
      .select((eb: ExpressionBuilder<any, any>) => ["concurrency_key", eb.fn.countAll().as("n")])
      .where("concurrency_key", "in", names.slice(i, i + BATCH_ROWS))
      .where("state", "in", SLOT_HOLDING_STATES.map((s) => sql.lit(s)))
      .groupBy("concurrency_key");
    for (const r of (await labelled(q, "key-holders").execute()) as { concurrency_key: string; n: number | string }[]) holders.set(r.concurrency_key, Number(r.n));
  }
  return holders;
}

/** A job waiting for a slot of its key: blocked, or scheduled and due. */
interface Waiting {
  id: number;
  state: "blocked" | "scheduled";
  queue: string;
  key: string;
  priority: number;
  runAt: number;
}

/**
 * Makes keys exact in bulk, under their locks (taken by the caller): for
 * each key of `limits` (name → stored limit) with free slots, its first
 * waiting jobs (blocked, or scheduled and due), in claim order, up to the
 * free slots, become ready. Statements: one count of holders, one read of
 * the waiting jobs per KEYS_PER_PICK keys with room, at most one UPDATE
 * per source state; none for the reads when no key has room. Due scheduled
 * jobs beyond a key's room are left to staging (stageDue), which blocks or
 * discards them. Returns the holders per key after promotion and the queues
 * that gained ready jobs.
 */
export async function promote(
  ctx: StoreContext,
  db: AnyDb,
  limits: ReadonlyMap<string, number>,
  now: number,
): Promise<{ holders: Map<string, number>; queues: Set<string> }> {
  const names = [...limits.keys()];
  const holders = await countHoldersOf(ctx, db, names);
  const queues = new Set<string>();
  const room = new Map<string, number>();
  for (const name of names) {
    const free = freeSlots(limits.get(name)!, holders.get(name) ?? 0);
    if (free > 0) room.set(name, free);
  }
  if (room.size === 0) return { holders, queues };
  const waiting = await readWaiting(ctx, db, room, now);
  const byKey = new Map<string, Waiting[]>();
  for (const w of waiting) {
    const list = byKey.get(w.key);
    if (list) list.push(w);
    else byKey.set(w.key, [w]);
  }
  const unblock: number[] = [];
  const stage: number[] = [];
  for (const [key, list] of byKey) {
    const taken = list.sort(byClaimOrder).slice(0, room.get(key)!);
    for (const w of taken) {
      (w.state === "blocked" ? unblock : stage).push(w.id);
      queues.add(w.queue);
    }
    holders.set(key, (holders.get(key) ?? 0) + taken.length);
  }
  // The rows are the keys' and the keys are locked: no other writer admits them meanwhile, so every id moves.
  for (const [event, ids] of [["unblock", unblock], ["stage", stage]] as const) {
    for (let i = 0; i < ids.length; i += BATCH_ROWS) {
      const update = guard(db.updateTable(ctx.tables.jobs).set({ state: TRANSITIONS[event].to, updated_at: now }), event, { now }).where("id", "in", ids.slice(i, i + BATCH_ROWS));
      await labelled(update, event).execute();
    }
  }
  return { holders, queues };
}

/**
 * For each key of `room` (name → free slots), its first `free` blocked jobs
 * and its first `free` due scheduled jobs, in claim order: one UNION ALL of
 * per-key reads (each on the key index, LIMITed) per KEYS_PER_PICK keys.
 */
async function readWaiting(ctx: StoreContext, db: AnyDb, room: ReadonlyMap<string, number>, now: number): Promise<Waiting[]> {
  const entries = [...room];
  const out: Waiting[] = [];
  for (let i = 0; i < entries.length; i += KEYS_PER_PICK) {
    // deno-lint-ignore no-explicit-any
    let query: any = null;
    entries.slice(i, i + KEYS_PER_PICK).forEach(([key, free], k) => {
      const base = () =>
        db.selectFrom(ctx.tables.jobs).select(["id", "state", "queue", "concurrency_key", "priority", "run_at"]).where("concurrency_key", "=", key);
      const blocked = inClaimOrder(base().where("state", "=", sql.lit("blocked"))).limit(free);
      const due = inClaimOrder(base().where("state", "=", sql.lit("scheduled")).where("run_at", "<=", now)).limit(free);
      for (const [j, branch] of [blocked, due].entries()) {
        const wrapped = db.selectFrom(branch.as(`w${k}_${j}`)).selectAll();
        query = query === null ? wrapped : query.unionAll(wrapped);
      }
    });
    const rows = (await labelled(query, "promote-pick").execute()) as {
      id: number | string;
      state: "blocked" | "scheduled";
      queue: string;
      concurrency_key: string;
      priority: number | string;
      run_at: number | string;
    }[];
    for (const r of rows) out.push({ id: Number(r.id), state: r.state, queue: r.queue, key: r.concurrency_key, priority: Number(r.priority), runAt: Number(r.run_at) });
  }
  return out;
}
