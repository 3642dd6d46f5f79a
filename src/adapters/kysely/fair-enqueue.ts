/**
 * The common fair enqueue as ONE statement, where the engine runs a
 * data-modifying WITH (PostgreSQL): one job whose only control is its
 * fairness key, of a queue the store knows fair (and prioritized, if the
 * job's priority is not 0). With the queue's clock (`clockOf`, read at
 * most every FAIR_CLOCK_TTL_MS), the statement upserts the key's row
 * advancing its last tag by the job's step (which locks the row until the
 * statement commits), and inserts the job with that tag: the tags of
 * `storeFairKeys` (fairness.ts), without a transaction's round trips.
 * Where the engine can, it also announces the job on commit.
 */
import { sql } from "kysely";
import type { NewJob } from "../../core/adapter.ts";
import { AdapterError } from "../../core/errors.ts";
import { fairKeysOf, fairTags, placedWhenDue } from "../../core/fairness.ts";
import { clockOf } from "./fairness.ts";
import { ARRAY_COLUMNS } from "./array-insert.ts";
import type { JobRecord } from "../../core/job.ts";
import type { AnyDb, Engine } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { compiledOnce, Slot } from "./compiled.ts";
import { labelled } from "./labels.ts";
import { rowToRecord, type JobRow } from "./row.ts";

/**
 * Whether a fair job can be tagged in the statement that stores it: its only
 * control is its fairness key, it is placed now (not when due), and its queue is known fair (and prioritized,
 * if the job's priority is not 0), so no queue row needs writing.
 */
function taggedInOneStatement(ctx: StoreContext, job: NewJob): boolean {
  if (!job.fairness || job.concurrency || job.idempotencyKey || job.rateLimit || job.debounce || placedWhenDue(job)) return false;
  return ctx.fairQueues.fair.has(job.queue) && (job.priority === 0 || ctx.fairQueues.prioritized.has(job.queue));
}

/** Whether `job` (alone in its call) takes `insertOneFair`. */
export function fairInOneStatement(ctx: StoreContext, job: NewJob): boolean {
  return ctx.engine.capabilities.arrays && taggedInOneStatement(ctx, job);
}

/** Stores `row` (the values `rowsOf` made of `job`) with its tag, in one statement; see the module comment. */
export async function insertOneFair(ctx: StoreContext, db: AnyDb, row: Record<string, unknown>, job: NewJob, notice?: Engine["statementNotice"]): Promise<JobRecord[]> {
  const { tables } = ctx;
  const columns = Object.keys(row).filter((c) => c !== "fair_tag");
  const build = () => {
    const q = new Slot("queue");
    const advanced = ctx.db
      .insertInto(tables.fairKeys)
      .values({ queue: q, name: new Slot(" key"), weight: new Slot(" weight"), served: new Slot(" first"), used: new Slot(" step") })
      .onConflict((oc) =>
        oc.columns(["queue", "name"]).doUpdateSet({
          weight: sql`excluded.weight`,
          served: sql`greatest(${sql.ref(`${tables.fairKeys}.served`)} + excluded.used, excluded.served)`,
        }),
      )
      .returning("served");
    const values = Object.fromEntries(columns.map((c) => [c, new Slot(c)]));
    const insert = ctx.db
      .with("fair_key", () => advanced)
      .insertInto(tables.jobs)
      .values({ ...values, fair_tag: sql`(select served from fair_key)` })
      .returningAll();
    if (!notice) return labelled(insert, "enqueue");
    return labelled(
      ctx.db
        .with("fair_key", () => advanced)
        .with("inserted", () => ctx.db.insertInto(tables.jobs).values({ ...values, fair_tag: sql`(select served from fair_key)` }).returningAll())
        .selectFrom("inserted")
        .selectAll()
        .select(notice.expression(new Slot(" notice")).as("announced")),
      "enqueue",
    );
  };
  const key = `insert-fair:${notice ? "announced:" : ""}${columns.join(",")}`;
  const step = fairTags(0, 0, [job.fairness!.weight]).last;
  const clock = await clockOf(ctx, db, job.queue);
  const values: Record<string, unknown> = { ...row, " key": job.fairness!.key, " weight": job.fairness!.weight, " step": step, " first": clock + step };
  if (notice) values[" notice"] = notice.payload({ queue: job.queue, due: false });
  const rows = (await db.executeQuery(compiledOnce(ctx.statements, key, build, values, ctx.engine.prepare))).rows as JobRow[];
  if (rows.length !== 1) throw new AdapterError(`${ctx.engine.name}: inserted ${rows.length} of 1 jobs`);
  return rows.map(rowToRecord);
}

/**
 * Whether `job` (alone in its call, outside a caller's transaction) is
 * stored in two autocommit statements (`upsertFairKey`, then its INSERT):
 * as `insertOneFair`'s jobs, on an engine whose `INSERT … ON DUPLICATE KEY
 * UPDATE` returns the row (`duplicateKeyUpsert`: MariaDB 10.5+), and whose row locks are not local
 * to one server (not Galera, where the transaction's retries cover the
 * key row's certification conflicts).
 */
export async function fairInTwoStatements(ctx: StoreContext, db: AnyDb, job: NewJob): Promise<boolean> {
  const { engine } = ctx;
  if (!engine.duplicateKeyUpsert || !taggedInOneStatement(ctx, job)) return false;
  await engine.knowServer?.(db);
  return !engine.locksAreLocal?.() && (await engine.duplicateKeyUpsert(db));
}

/**
 * The first of the two autocommit statements that store `job` (see
 * `fairInTwoStatements`; enqueue.ts inserts it, with the tag returned, as
 * it inserts any one row without RETURNING): the key's upsert advances its
 * last tag by the job's step and returns it, atomic on the key row, so two
 * enqueues of one key get successive tags (R21); a deadlock there is
 * retried (`Engine.retriedStatement`). Without a transaction, an enqueue
 * that fails after this statement has advanced its key one step and stored
 * no job: nothing is lost (the call fails), and the key's next job lands
 * that step later, as if the failed one had run.
 */
export async function upsertFairKey(ctx: StoreContext, db: AnyDb, job: NewJob): Promise<number> {
  const { key, weight } = job.fairness!;
  const step = fairTags(0, 0, [weight]).last;
  const clock = await clockOf(ctx, db, job.queue);
  const upsert = db
    .insertInto(ctx.tables.fairKeys)
    .values({ queue: job.queue, name: key, weight, served: clock + step, used: step })
    .onDuplicateKeyUpdate({ weight: sql`values(weight)`, served: sql`greatest(served + values(used), values(served))` })
    .returning(["served"]);
  // Sent as a query: kysely's insert drops RETURNING's rows on this dialect.
  const compiled = labelled(upsert, "fair-store").compile();
  const send = (d: AnyDb) => d.executeQuery(compiled);
  const rows = (await (ctx.engine.retriedStatement ? ctx.engine.retriedStatement(db, send) : send(db))).rows as { served: unknown }[];
  if (rows.length !== 1) throw new AdapterError(`${ctx.engine.name}: a fairness key's upsert returned ${rows.length} rows`);
  return Number(rows[0]!.served);
}

/** The job columns that travel as arrays in `insertManyFair`, with their SQL types: an unkeyed insert's and the fairness key. */
const MANY_COLUMNS = [...ARRAY_COLUMNS, ["fair_key", "text"]] as const;

/** Whether a batch takes `insertManyFair`: arrays, two jobs or more, at least one fair, and each `taggedInOneStatement` or without fairness and controls. */
export function fairBatchInOneStatement(ctx: StoreContext, jobs: readonly NewJob[]): boolean {
  if (!ctx.engine.capabilities.arrays || jobs.length < 2 || !jobs.some((j) => j.fairness)) return false;
  return jobs.every((j) => (j.fairness ? taggedInOneStatement(ctx, j) : !j.concurrency && !j.idempotencyKey && !j.rateLimit && !j.debounce));
}

/**
 * A batch (see `fairBatchInOneStatement`) in ONE statement: its keys'
 * rows upserted in (queue, name) order, each advanced by the sum of its
 * jobs' steps (locked until the statement commits), and the jobs inserted
 * from arrays, each fair job's tag its key's new last tag less the steps of
 * the key's later jobs in the batch. Returns the ids in input order.
 */
export async function insertManyFair(ctx: StoreContext, db: AnyDb, jobs: readonly NewJob[], now: number): Promise<number[]> {
  const { tables } = ctx;
  const keys = fairKeysOf(jobs).map((g) => ({ ...g, steps: g.weights.map((w) => fairTags(0, 0, [w]).last) }));
  const rest = new Array<number | null>(jobs.length).fill(null);
  const keyName = new Array<string | null>(jobs.length).fill(null);
  const first: number[] = [];
  for (const g of keys) {
    const total = g.steps.reduce((a, b) => a + b, 0);
    let after = total;
    g.at.forEach((i, k) => {
      after -= g.steps[k]!;
      rest[i] = after;
      keyName[i] = g.name;
    });
    first.push((await clockOf(ctx, db, g.queue)) + total);
  }
  const values: Record<string, unknown> = {
    kq: keys.map((g) => g.queue),
    kn: keys.map((g) => g.name),
    kw: keys.map((g) => g.weight),
    kf: first,
    ka: keys.map((g) => g.steps.reduce((a, b) => a + b, 0)),
    kname: keyName,
    rest,
    now,
  };
  const rows = jobs.map((j) => ({
    task: j.task,
    queue: j.queue,
    payload: j.payload,
    state: j.state,
    priority: j.priority,
    run_at: j.runAt,
    max_attempts: j.maxAttempts,
    backoff: j.backoff ?? null,
    timeout_ms: j.timeoutMs ?? null,
    trace_context: j.traceContext ?? null,
    fair_key: j.fairness?.key || null,
  }));
  for (const [column] of MANY_COLUMNS) values[column] = rows.map((r) => (r as Record<string, unknown>)[column] ?? null);
  const build = () => {
    const arr = (name: string, type: string) => sql`${new Slot(name)}::${sql.raw(`${type}[]`)}`;
    // A raw WITH member is not parenthesized by kysely: the parentheses are the statement's own.
    const advanced = sql`(insert into ${sql.table(tables.fairKeys)} (queue, name, weight, served, used)
      select k.q, k.n, k.w, k.f, k.a from unnest(${arr("kq", "text")}, ${arr("kn", "text")}, ${arr("kw", "integer")}, ${arr("kf", "bigint")}, ${arr("ka", "bigint")}) as k(q, n, w, f, a)
      on conflict (queue, name) do update set weight = excluded.weight, served = greatest(${sql.ref(`${tables.fairKeys}.served`)} + excluded.used, excluded.served)
      returning queue, name, served)`;
    const names = MANY_COLUMNS.map(([c]) => c);
    const arrays = [...MANY_COLUMNS.map(([c, type]) => arr(c, type)), arr("kname", "text"), arr("rest", "bigint")];
    const tag = sql`(select fk.served from fair_key fk where fk.queue = t.queue and fk.name = t.kname) - t.rest`;
    return labelled(
      ctx.db
        .with("fair_key", () => advanced as never)
        .insertInto(tables.jobs)
        .columns([...names, "fair_tag", "attempt", "created_at", "updated_at"])
        .expression(
          sql`select ${sql.join(names.map((n) => sql.ref(`t.${n}`)))}, ${tag}, 0, ${new Slot("now")}::bigint, ${new Slot("now")}::bigint from unnest(${sql.join(arrays)}) as t(${sql.raw([...names, "kname", "rest"].join(", "))})`,
        )
        .returning("id"),
      "enqueue",
    );
  };
  const result = await db.executeQuery(compiledOnce(ctx.statements, "insert-many-fair", build, values, ctx.engine.prepare));
  const ids = (result.rows as { id: number | string }[]).map((r) => Number(r.id)).sort((a, b) => a - b);
  if (ids.length !== jobs.length) throw new AdapterError(`${ctx.engine.name}: inserted ${ids.length} of ${jobs.length} jobs`);
  return ids;
}
