import { sql, type ExpressionBuilder } from "kysely";
import { SLOT_HOLDING_STATES } from "../../core/states.ts";
import { TRANSITIONS } from "../../core/transitions.ts";
import { byClaimOrder } from "../../core/claim-order.ts";
import { freeSlots } from "../../core/concurrency.ts";
import type { AnyDb } from "./engine.ts";
import { BATCH_ROWS, type StoreContext } from "./context.ts";
import { guard } from "./guard.ts";
import { compiledOnce, PLANNED_EACH_RUN, Slot } from "./compiled.ts";
import { inClaimOrder } from "./row.ts";
import { labelled } from "./labels.ts";
import { rebalance } from "./admission.ts";
import { GUARD_COLUMN, locksAreLocal, writeGuards } from "./guard-writes.ts";

/*
 * Concurrency keys in bulk: many keys locked, counted and promoted with a
 * bounded number of statements, whatever the number of keys and jobs. The
 * per-key forms (lockKey, rebalance) are in admission.ts; both keep the
 * same lock order (a transaction that locks several keys locks them in
 * name order, in one statement), so they cannot deadlock each other.
 */

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
  await writeGuards(ctx, db, ctx.tables.keys, "name", [...limits.keys()]);
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
      : insert.onDuplicateKeyUpdate({ max_holders: sql`values(max_holders)`, ...(locksAreLocal(ctx) ? { [GUARD_COLUMN]: sql`${sql.ref(GUARD_COLUMN)} + 1` } : {}) });
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

/** A blocked job waiting for a slot of its key. */
interface Waiting {
  id: number;
  queue: string;
  key: string;
  priority: number;
  runAt: number;
}

/**
 * Makes keys exact in bulk, under their locks (taken by the caller): for
 * each key of `limits` (name → stored limit) with free slots, its first
 * blocked jobs, in claim order, up to the free slots, become ready. A key
 * that also has due scheduled jobs is made exact by `rebalance` instead
 * (they are admitted, blocked or discarded in claim order with its blocked
 * jobs; rare: staging admits due jobs at every claim). Statements: one count
 * of holders (which also finds the keys with due jobs); when a key has room,
 * on PostgreSQL one UPDATE that reads and unblocks (`unblockFirst`),
 * elsewhere the reads of `readBlocked` and one UPDATE per BATCH_ROWS
 * promoted jobs. Returns the holders per key after promotion and the queues
 * that gained ready jobs.
 */
export async function promote(
  ctx: StoreContext,
  db: AnyDb,
  limits: ReadonlyMap<string, number>,
  now: number,
): Promise<{ holders: Map<string, number>; queues: Set<string> }> {
  const names = [...limits.keys()];
  const queues = new Set<string>();
  const { holders, due } = await holdersAndDue(ctx, db, names, now);
  if (due.size > 0) {
    const sorted = [...due].sort();
    for (const name of sorted) for (const queue of (await rebalance(ctx, db, name, now)).queues) queues.add(queue);
    for (const [name, n] of await countHoldersOf(ctx, db, sorted)) holders.set(name, n);
  }
  const room = new Map<string, number>();
  for (const name of names) {
    const free = freeSlots(limits.get(name)!, holders.get(name) ?? 0);
    if (free > 0 && !due.has(name)) room.set(name, free);
  }
  if (room.size === 0) return { holders, queues };
  // The rows are the keys' and the keys are locked: no other writer admits them meanwhile.
  const promoted = ctx.engine.capabilities.arrays ? await unblockFirst(ctx, db, room, now) : await unblockRead(ctx, db, room, now);
  for (const w of promoted) {
    queues.add(w.queue);
    holders.set(w.key, (holders.get(w.key) ?? 0) + 1);
  }
  return { holders, queues };
}

/** Reads the first blocked jobs of each key of `room` (`readBlocked`), then unblocks them: one UPDATE per BATCH_ROWS jobs. */
async function unblockRead(ctx: StoreContext, db: AnyDb, room: ReadonlyMap<string, number>, now: number): Promise<Waiting[]> {
  const byKey = new Map<string, Waiting[]>();
  for (const w of await readBlocked(ctx, db, room)) {
    const list = byKey.get(w.key);
    if (list) list.push(w);
    else byKey.set(w.key, [w]);
  }
  const taken = [...byKey].flatMap(([key, list]) => list.sort(byClaimOrder).slice(0, room.get(key)!));
  const ids = taken.map((w) => w.id);
  for (let i = 0; i < ids.length; i += BATCH_ROWS) {
    const update = guard(db.updateTable(ctx.tables.jobs).set({ state: TRANSITIONS.unblock.to, updated_at: now }), "unblock", { now, byId: true }).where("id", "in", ids.slice(i, i + BATCH_ROWS));
    await labelled(update, "unblock").execute();
  }
  return taken;
}

/**
 * With arrays (PostgreSQL): ONE statement, compiled once, that unblocks the
 * first `free` blocked jobs of each key of `room` in claim order, `UPDATE …
 * WHERE id = ANY(ARRAY(<the LATERAL read>)) AND state IN ('blocked')
 * RETURNING`. Its read sees every row the locks of the keys protect (the
 * statement starts after they were taken).
 */
async function unblockFirst(ctx: StoreContext, db: AnyDb, room: ReadonlyMap<string, number>, now: number): Promise<Waiting[]> {
  const entries = [...room];
  const values = { keys: entries.map(([k]) => k), free: entries.map(([, f]) => f), now };
  const build = () => {
    const ids = lateralPick(ctx).clearSelect().select("w.id");
    const update = ctx.db.updateTable(ctx.tables.jobs).set({ state: TRANSITIONS.unblock.to, updated_at: new Slot("now") });
    return labelled(guard(update, "unblock", { now: 0, byId: true }).where(sql<boolean>`${sql.ref("id")} = any(array(${ids}))`).returning([...WAITING_COLUMNS]), "unblock");
  };
  const rows = (await db.executeQuery(compiledOnce(ctx.statements, "promote-unblock", build, values, PLANNED_EACH_RUN))).rows as WaitingRow[];
  return rows.map(toWaiting);
}

/**
 * Each key's holders (SLOT_HOLDING_STATES) among `names`, and the keys that
 * have scheduled jobs due at `now`: one statement per BATCH_ROWS keys. Call
 * under the keys' locks.
 */
async function holdersAndDue(ctx: StoreContext, db: AnyDb, names: readonly string[], now: number): Promise<{ holders: Map<string, number>; due: Set<string> }> {
  const holders = new Map<string, number>(names.map((n) => [n, 0]));
  const due = new Set<string>();
  const holding = SLOT_HOLDING_STATES.map((s) => sql.lit(s));
  const scheduled = sql.lit(TRANSITIONS.stage.from[0]!);
  for (let i = 0; i < names.length; i += BATCH_ROWS) {
    // Built from expression nodes, not raw SQL, so docket/testing's mutations can rewrite the states counted.
    const q = db
      .selectFrom(ctx.tables.jobs)
      .select((eb: ExpressionBuilder<any, any>) => [
        "concurrency_key",
        eb.fn.sum<number>(eb.case().when("state", "in", holding).then(1).else(0).end()).as("n"),
        eb.fn.max<number>(eb.case().when("state", "=", scheduled).then(1).else(0).end()).as("due"),
      ])
      .where("concurrency_key", "in", names.slice(i, i + BATCH_ROWS))
      .where((eb: ExpressionBuilder<any, any>) =>
        eb.or([eb("state", "in", SLOT_HOLDING_STATES.map((s) => sql.lit(s))), eb.and([eb("state", "=", scheduled), eb("run_at", "<=", now)])]),
      )
      .groupBy("concurrency_key");
    for (const r of (await labelled(q, "key-holders").execute()) as { concurrency_key: string; n: number | string; due: number | string }[]) {
      holders.set(r.concurrency_key, Number(r.n));
      if (Number(r.due) === 1) due.add(r.concurrency_key);
    }
  }
  return { holders, due };
}

/** A row of the blocked jobs' read, as drivers return it. */
interface WaitingRow {
  id: number | string;
  queue: string;
  concurrency_key: string;
  priority: number | string;
  run_at: number | string;
}

const WAITING_COLUMNS = ["id", "queue", "concurrency_key", "priority", "run_at"] as const;

/** Without arrays: the places (OFFSETs) one statement reads per key; a key with more free slots takes more rounds. */
const PLACES_PER_READ = 8;

/**
 * For each key of `room` (name → free slots), its first `free` blocked
 * jobs, in claim order, on an engine without arrays or LATERAL (MariaDB,
 * SQLite; PostgreSQL reads and unblocks in one statement, `unblockFirst`):
 * one statement per BATCH_ROWS keys and PLACES_PER_READ places whose
 * columns are correlated scalar reads on the key index, the i-th blocked
 * job's id per key (`LIMIT 1 OFFSET i`), then one read of those jobs by id
 * (a UNION of 200 derived LIMITed reads took MariaDB 18 ms for 100 keys,
 * these 3 ms; on PostgreSQL such a UNION cost ~1 ms of planning per read).
 */
async function readBlocked(ctx: StoreContext, db: AnyDb, room: ReadonlyMap<string, number>): Promise<Waiting[]> {
  const ids = await blockedIds(ctx, db, room);
  const rows: WaitingRow[] = [];
  for (let i = 0; i < ids.length; i += BATCH_ROWS) {
    const q = db.selectFrom(ctx.tables.jobs).select([...WAITING_COLUMNS]).where("id", "in", ids.slice(i, i + BATCH_ROWS));
    rows.push(...((await q.execute()) as WaitingRow[]));
  }
  return rows.map(toWaiting);
}

const toWaiting = (r: WaitingRow): Waiting => ({ id: Number(r.id), queue: r.queue, key: r.concurrency_key, priority: Number(r.priority), runAt: Number(r.run_at) });

/** The ids of the blocked jobs `readBlocked` wants, by correlated scalar reads (engines without LATERAL). */
async function blockedIds(ctx: StoreContext, db: AnyDb, room: ReadonlyMap<string, number>): Promise<number[]> {
  const ids: number[] = [];
  let pending = [...room];
  for (let offset = 0; pending.length > 0; offset += PLACES_PER_READ) {
    const places = Math.min(PLACES_PER_READ, Math.max(...pending.map(([, free]) => free)) - offset);
    const more: [string, number][] = [];
    for (let i = 0; i < pending.length; i += BATCH_ROWS) {
      const chunk = pending.slice(i, i + BATCH_ROWS);
      // deno-lint-ignore no-explicit-any
      const columns = (eb: ExpressionBuilder<any, any>) =>
        Array.from({ length: places }, (_, p) => {
          const read = eb.selectFrom(`${ctx.tables.jobs} as j`).select("j.id").whereRef("j.concurrency_key", "=", "k.name").where("j.state", "=", sql.lit("blocked"));
          return inClaimOrder(read).limit(1).offset(offset + p).as(`b${p}`);
        });
      const q = db.selectFrom(`${ctx.tables.keys} as k`).select("k.name").select(columns).where("k.name", "in", chunk.map(([name]) => name));
      const found = new Map(((await labelled(q, "promote-pick").execute()) as Record<string, string | number | null>[]).map((r) => [r.name as string, r]));
      for (const [name, free] of chunk) {
        const r = found.get(name);
        if (!r) continue;
        let last: unknown = null;
        for (let p = 0; p < places && offset + p < free; p++) {
          last = r[`b${p}`] ?? null;
          if (last !== null) ids.push(Number(last));
        }
        // Every place read held a job and the key has room beyond them: read the next places.
        if (last !== null && free > offset + places) more.push([name, free]);
      }
    }
    pending = more;
  }
  return ids;
}

/** With array slots `keys` and `free`: the keys joined LATERALly to a LIMITed read of their first blocked jobs, in claim order (see `unblockFirst`). */
function lateralPick(ctx: StoreContext) {
  const db = ctx.db;
  const keys = sql`unnest(${new Slot("keys")}::text[], ${new Slot("free")}::int[])`.as<"k">(sql`k(name, free)`);
  const blocked = inClaimOrder(
    db.selectFrom(ctx.tables.jobs).select([...WAITING_COLUMNS]).where("concurrency_key", "=", sql.ref("k.name")).where("state", "=", sql.lit("blocked")),
  ).limit(sql<number>`${sql.ref("k.free")}`);
  // deno-lint-ignore no-explicit-any
  const pick = db.selectFrom(keys).innerJoinLateral(blocked.as("w") as any, (join: any) => join.onTrue()).selectAll("w");
  return labelled(pick, "promote-pick");
}
