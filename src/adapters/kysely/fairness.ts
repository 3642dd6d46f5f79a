/**
 * Fair sharing in storage (the rule is the core's, core/fairness.ts): a
 * fair queue's keys are rows `(queue, name, weight, served)`, `served`
 * being the key's last tag; each job of a fair queue carries its tag
 * (`fair_tag`), given at enqueue under its key row's lock. Claims read no
 * key row: they take a fair queue's ready jobs in tag order. A queue is fair
 * once it has held a fairness-keyed job (`queues.fair`, never cleared), and
 * prioritized once it has held a fair job of a priority other than 0
 * (`queues.fair_priorities`): its claims then order each key's jobs by
 * priority (core `withinKeys`).
 */
import { sql, type ExpressionBuilder } from "kysely";
import type { NewJob } from "../../core/adapter.ts";
import { IMPLICIT_FAIR_KEY, PLACED_WHEN_DUE, fairClock, fairKeysOf, fairTags } from "../../core/fairness.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { labelled } from "./labels.ts";
import { FAIR_QUEUES_TTL_MS, FAIR_CLOCK_TTL_MS } from "./fair-queues.ts";

export { FairQueues } from "./fair-queues.ts";

/** The queues among `queues` known fair, the list read again when older than FAIR_QUEUES_TTL_MS. */
export async function fairQueuesAmong(ctx: StoreContext, db: AnyDb, queues: readonly string[]): Promise<Set<string>> {
  const known = ctx.fairQueues;
  if (performance.now() - known.readAt >= FAIR_QUEUES_TTL_MS) {
    known.readAt = performance.now();
    const rows = (await db.selectFrom(ctx.tables.queues).select(["name", "fair_priorities"]).where("fair", "=", 1).execute()) as { name: string; fair_priorities: unknown }[];
    for (const r of rows) {
      known.fair.add(r.name);
      if (Number(r.fair_priorities) === 1) known.prioritized.add(r.name);
    }
  }
  return new Set(queues.filter((q) => known.fair.has(q)));
}

/**
 * Gives the fair jobs of a batch their tags (`values[i].fair_tag`, for each
 * job with `fairness`; the implicit key's for IMPLICIT_FAIR_KEY; a job
 * placed when due gets PLACED_WHEN_DUE, and its key no advance), inside the
 * enqueue's transaction: marks their queues fair (and prioritized, for a job
 * of priority other than 0), reads each queue's clock, and advances each
 * key's last tag by its jobs' steps in one upsert per statement, which
 * also locks the key rows (in (queue, name) order) until the transaction
 * ends; the tags are read back under that lock (RETURNING, or a locking
 * read), so two enqueues of one key get successive tags (R21).
 */
export async function storeFairKeys(ctx: StoreContext, db: AnyDb, jobs: readonly NewJob[], values: Record<string, unknown>[]): Promise<void> {
  const keys = fairKeysOf(jobs);
  if (keys.length === 0) return;
  const { tables, engine } = ctx;
  const queues = [...new Set(keys.map((g) => g.queue))].sort();
  const prioritized = new Set(jobs.filter((j) => j.fairness && j.priority !== 0).map((j) => j.queue));
  await markQueues(ctx, db, queues, prioritized);
  const clocks = new Map<string, number>();
  for (const queue of queues) clocks.set(queue, await clockOf(ctx, db, queue));
  // `used` carries each key's advance (the sum of its jobs' steps) into the upsert: last = max(last, clock) + advance.
  const advance = new Map(keys.map((g) => [g, fairTags(0, 0, g.weights).last]));
  const rows = keys.map((g) => ({ queue: g.queue, name: g.name, weight: g.weight, served: clocks.get(g.queue)! + advance.get(g)!, used: advance.get(g)! }));
  const insert = db.insertInto(tables.fairKeys).values(rows);
  const upsert = engine.capabilities.onConflict
    ? insert.onConflict((oc) =>
        oc.columns(["queue", "name"]).doUpdateSet({
          weight: (eb: ExpressionBuilder<any, any>) => eb.ref("excluded.weight"),
          served: sql`case when ${sql.ref(`${tables.fairKeys}.served`)} + ${sql.ref("excluded.used")} > ${sql.ref("excluded.served")} then ${sql.ref(`${tables.fairKeys}.served`)} + ${sql.ref("excluded.used")} else ${sql.ref("excluded.served")} end`,
        }),
      )
    : insert.onDuplicateKeyUpdate({ weight: sql`values(weight)`, served: sql`greatest(served + values(used), values(served))` });
  const lasts = new Map<string, number>();
  if (engine.capabilities.returning) {
    for (const r of (await labelled(upsert.returning(["queue", "name", "served"]), "fair-store").execute()) as { queue: string; name: string; served: unknown }[]) {
      lasts.set(JSON.stringify([r.queue, r.name]), Number(r.served));
    }
  } else {
    await labelled(upsert, "fair-store").execute();
    for (const queue of queues) {
      let read = db.selectFrom(tables.fairKeys).select(["name", "served"]).where("queue", "=", queue).where("name", "in", keys.filter((g) => g.queue === queue).map((g) => g.name));
      if (engine.capabilities.rowLocks) read = read.forUpdate();
      for (const r of (await labelled(read, "fair-keys").execute()) as { name: string; served: unknown }[]) lasts.set(JSON.stringify([queue, r.name]), Number(r.served));
    }
  }
  for (const g of keys) {
    const last = lasts.get(JSON.stringify([g.queue, g.name]))!;
    const { tags } = fairTags(last - advance.get(g)!, Number.NEGATIVE_INFINITY, g.weights);
    g.at.forEach((i, k) => (values[i]!.fair_tag = tags[k]));
    for (const i of g.due) values[i]!.fair_tag = PLACED_WHEN_DUE;
  }
}

/** Marks `queues` fair (and those in `prioritized` prioritized) where this store does not know them so; remembers them. */
async function markQueues(ctx: StoreContext, db: AnyDb, queues: readonly string[], prioritized: ReadonlySet<string>): Promise<void> {
  const known = ctx.fairQueues;
  const { tables, engine } = ctx;
  for (const queue of queues) {
    const priorities = prioritized.has(queue) ? 1 : 0;
    if (known.fair.has(queue) && (priorities === 0 || known.prioritized.has(queue))) continue;
    const insert = db.insertInto(tables.queues).values({ name: queue, paused: 0, max_running: null, fair: 1, fair_priorities: priorities });
    const set = priorities === 1 ? { fair: 1, fair_priorities: 1 } : { fair: 1 };
    await (engine.capabilities.onConflict ? insert.onConflict((oc) => oc.column("name").doUpdateSet(set)) : insert.onDuplicateKeyUpdate(set)).execute();
    known.fair.add(queue);
    if (priorities === 1) known.prioritized.add(queue);
  }
}

/**
 * `queue`'s clock (core fairClock): from the smallest tag of its ready jobs,
 * or the largest last tag of its keys; read at most every FAIR_CLOCK_TTL_MS,
 * unless `fresh`. Callers on the store's pool (`db` is `ctx.db`) that find
 * it stale while a read is under way get that read's clock: one read per
 * stale moment, not one per caller.
 */
export async function clockOf(ctx: StoreContext, db: AnyDb, queue: string, fresh = false): Promise<number> {
  const known = ctx.fairQueues.clocks.get(queue);
  if (!fresh && known !== undefined && performance.now() - known.at < FAIR_CLOCK_TTL_MS) return known.clock;
  // A read on the pool is shared by the pool's callers; one in a transaction is its own (a shared read could wait
  // for a pool connection that the transactions awaiting it hold).
  const shared = !fresh && db === ctx.db;
  const pending = shared ? ctx.fairQueues.reading.get(queue) : undefined;
  if (pending !== undefined) return pending;
  const reading = readClock(ctx, db, queue).then((clock) => {
    ctx.fairQueues.clocks.set(queue, { clock, at: performance.now() });
    return clock;
  });
  if (!shared) return reading;
  ctx.fairQueues.reading.set(queue, reading);
  try {
    return await reading;
  } finally {
    ctx.fairQueues.reading.delete(queue);
  }
}

async function readClock(ctx: StoreContext, db: AnyDb, queue: string): Promise<number> {
  const { tables } = ctx;
  // The first entry of the (queue, fair_tag) index, not min(): PostgreSQL planned min() as an aggregate over every
  // ready job of the queue when its statistics were stale (18 ms at 65,000 ready, on each fair enqueue).
  const head = await db
    .selectFrom(tables.jobs)
    .select("fair_tag as m")
    .where("queue", "=", queue)
    .where("state", "=", "ready")
    .where("fair_tag", "is not", null)
    .orderBy("fair_tag")
    .limit(1)
    .executeTakeFirst();
  if (head?.m !== null && head?.m !== undefined) return fairClock(Number(head.m), 0);
  const top = await db
    .selectFrom(tables.fairKeys)
    .select((eb: ExpressionBuilder<any, any>) => eb.fn.max("served").as("m"))
    .where("queue", "=", queue)
    .executeTakeFirst();
  return fairClock(null, Number(top?.m ?? 0));
}

/** The implicit key's `fairness` for a job without one in a fair queue. */
export const IMPLICIT_FAIRNESS = { key: IMPLICIT_FAIR_KEY, weight: 1 } as const;
