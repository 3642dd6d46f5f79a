import type { EnqueueParams, EnqueuedRecord } from "../../core/adapter.ts";
import { AdapterError, IdempotencyConflictError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import { TERMINAL_STATES, type JobState } from "../../core/states.ts";
import { admit, discardReason } from "../../core/concurrency.ts";
import { nextTurn } from "../../core/turn.ts";
import type { AnyDb, Engine } from "./engine.ts";
import { BATCH_ROWS, type StoreContext } from "./context.ts";
import { promote, upsertKeys } from "./promotion.ts";
import { rowToRecord, type JobRow } from "./row.ts";
import { compiledOnce, Slot } from "./compiled.ts";
import { chunkRows } from "./statement-size.ts";
import { labelled } from "./labels.ts";
import { arrayRuns, created, insertAdmittedRows, insertUnkeyed } from "./array-insert.ts";
import { newJobRecord } from "../../core/new-job.ts";
import { storeRateKeys } from "./rate-limits.ts";
import { mergeOrInsert, upsertDebounced, upsertOnDuplicate } from "./debounce.ts";
import { IMPLICIT_FAIRNESS, fairQueuesAmong, storeFairKeys } from "./fairness.ts";
import { lockParents, waitingJobs, withDependencyColumns, wireBatch } from "./dependencies.ts";
import { fairBatchInOneStatement, fairInOneStatement, fairInTwoStatements, insertManyFair, insertOneFair, upsertFairKey } from "./fair-enqueue.ts";

/**
 * Stores new jobs, all or none, and returns their records in input order.
 * Keyed jobs are admitted under their keys' locks (ready, blocked, or
 * cancelled by a "discard" policy). A job whose idempotency key is held is
 * not stored: its record is the holder's (`created: false`); when the holder
 * is of another task, the whole call is refused (IdempotencyConflictError)
 * and stores nothing. Ready jobs are announced to other processes once
 * stored. See DocketAdapter.enqueue.
 */
export async function enqueue(ctx: StoreContext, given: EnqueueParams, background: (work: Promise<void>) => void): Promise<EnqueuedRecord[]> {
  if (given.jobs.length === 0) return [];
  const { db, engine } = ctx;
  const params = await withImplicitKeys(ctx, given);
  if (params.jobs.some((j) => j.after)) return enqueueWithParents(ctx, params);
  const oneByOne = params.jobs.some((j) => j.concurrency || j.idempotencyKey || j.rateLimit || j.debounce || j.fairness);
  if (!oneByOne && engine.capabilities.arrays && (params.jobs.length > 1 || params.transaction !== undefined)) {
    // Unkeyed jobs, with arrays: one statement per batch, whatever its size (several only past a size in bytes).
    const runs = arrayRuns(params.jobs);
    const write = async (w: AnyDb) => {
      let records: EnqueuedRecord[] = [];
      for (const run of runs) records = records.concat(await insertUnkeyed(ctx, w, run, params.now));
      return records;
    };
    const records = runs.length === 1 ? await engine.writeStatement(db, write) : await engine.writeTransaction(db, write);
    // As below: in the caller's transaction the notice rides on it; otherwise it is sent in the background.
    if (params.transaction !== undefined) await engine.announceReady(db, readyQueues(records));
    else announceAfter(ctx, records, background);
    return records;
  }
  if (fairBatchInOneStatement(ctx, params.jobs)) {
    // Jobs whose only control is a fairness key, of queues known fair: one statement tags and stores them all.
    const ids = await engine.writeStatement(db, (w) => insertManyFair(ctx, w, params.jobs, params.now));
    const records = params.jobs.map((job, i) => created(newJobRecord(ids[i]!, job, params.now)));
    if (params.transaction !== undefined) await engine.announceReady(db, readyQueues(records));
    else announceAfter(ctx, records, background);
    return records;
  }
  const values = rowsOf(params);
  if (values.length === 1 && fairInOneStatement(ctx, params.jobs[0]!)) {
    // One fair job of a queue known fair: one statement tags and stores it (and announces it, where it can).
    const notice = params.transaction === undefined ? carried(ctx, values[0]!) : undefined;
    const records = await engine.writeStatement(db, (w) => insertOneFair(ctx, w, values[0]!, params.jobs[0]!, notice));
    if (params.transaction !== undefined) await engine.announceReady(db, readyQueues(records));
    else if (!notice) announceAfter(ctx, records, background);
    return records.map(created);
  }
  if (values.length === 1 && params.transaction === undefined && (await fairInTwoStatements(ctx, db, params.jobs[0]!))) {
    // One fair job of a queue known fair, where the key's upsert returns its row (MariaDB): two autocommit statements.
    return [created(await insertOneRow(ctx, db, { ...values[0]!, fair_tag: await upsertFairKey(ctx, db, params.jobs[0]!) }, background))];
  }
  if (!oneByOne && values.length <= BATCH_ROWS && engine.capabilities.returning) {
    // One INSERT … RETURNING is atomic on its own: no transaction (on PostgreSQL, no BEGIN/COMMIT round trips).
    if (values.length === 1 && params.transaction === undefined) {
      // The common single enqueue: one statement that stores the job and, where the engine can, announces it on commit.
      const notice = carried(ctx, values[0]!);
      const records = await engine.writeStatement(db, (w) => insertOne(ctx, w, values[0]!, notice));
      if (!notice) announceAfter(ctx, records, background);
      return records.map(created);
    }
    const records = await engine.writeStatement(db, (w) => insertRows(ctx, w, values));
    // In the caller's transaction the notice rides on it. Otherwise the jobs are stored: the notice is sent
    // in the background (a failure is reported, not thrown: workers still poll), on the next turn, after
    // the claims of this process's workers that the enqueue wakes.
    if (params.transaction !== undefined) await engine.announceReady(db, readyQueues(records));
    else announceAfter(ctx, records, background);
    return records.map(created);
  }
  if (!oneByOne && values.length === 1 && params.transaction === undefined) return [created(await insertOneRow(ctx, db, values[0]!, background))];
  const only = params.jobs[0]!;
  if (values.length === 1 && only.debounce && !only.concurrency && !only.idempotencyKey && !only.rateLimit && !only.fairness) {
    // One debounced job with no other control: one statement merges it or stores it (no ready notice: it is scheduled).
    const upsert = engine.insertedFlag ? upsertDebounced : (await engine.duplicateKeyUpsert?.(db)) ? upsertOnDuplicate : null;
    const record = upsert && (await engine.writeStatement(db, (w) => upsert(ctx, w, values[0]!, only.debounce!, params.now)));
    if (record) return [record];
  }
  return engine.writeTransaction(db, async (trx) => {
    const records = oneByOne ? await insertAdmitted(ctx, trx, params, values) : (await insertRows(ctx, trx, values)).map(created);
    await engine.announceReady(trx, readyQueues(records.filter((r) => r.created)));
    return records;
  });
}

/**
 * A batch in which some job has parents, in one transaction: the stored
 * parents are locked and checked first (`lockParents`: nothing is written
 * when one is missing or ended dead or cancelled), the jobs are inserted as
 * `insertAdmitted` inserts them (a job with a parent to wait for is stored
 * waiting, unadmitted), then their edges and counts (`wireBatch`).
 */
async function enqueueWithParents(ctx: StoreContext, params: EnqueueParams): Promise<EnqueuedRecord[]> {
  const ids = [...new Set(params.jobs.flatMap((j) => j.after?.ids ?? []))];
  return ctx.engine.writeTransaction(ctx.db, async (trx) => {
    const states = await lockParents(ctx, trx, ids);
    const waiting = { ...params, jobs: waitingJobs(params.jobs, states) };
    const inserted = await insertAdmitted(ctx, trx, waiting, withDependencyColumns(waiting.jobs, rowsOf(waiting), states));
    // Children of a batch parent that turned out ended were settled after their insert: returned as stored.
    const records = (await wireBatch(ctx, trx, waiting, states, inserted)) ? await reread(ctx, trx, inserted) : inserted;
    await ctx.engine.announceReady(trx, readyQueues(records.filter((r) => r.created)));
    return records;
  });
}

/** `records` as stored now (read in the caller's transaction), each keeping its `created`. */
async function reread(ctx: StoreContext, db: AnyDb, records: readonly EnqueuedRecord[]): Promise<EnqueuedRecord[]> {
  const rows = new Map((await rowsByIds(ctx, db, [...new Set(records.map((r) => r.id))])).map((row) => [Number(row.id), rowToRecord(row)]));
  return records.map((r) => ({ ...(rows.get(r.id) ?? r), created: r.created }));
}

/** The rows of jobs `ids` (ascending), in id order, BATCH_ROWS ids per statement; missing ones are left out. */
async function rowsByIds(ctx: StoreContext, db: AnyDb, ids: readonly number[]): Promise<JobRow[]> {
  const rows: JobRow[] = [];
  for (let i = 0; i < ids.length; i += BATCH_ROWS) {
    const chunk = ids.slice(i, i + BATCH_ROWS);
    rows.push(...((await labelled(db.selectFrom(ctx.tables.jobs).selectAll().where("id", "in", chunk).orderBy("id"), "enqueue").execute()) as JobRow[]));
  }
  return rows;
}

/** `params` with the implicit key's fairness on each job without a fairness key of a queue the store knows fair (see FairQueues). */
async function withImplicitKeys(ctx: StoreContext, params: EnqueueParams): Promise<EnqueueParams> {
  const plain = params.jobs.filter((j) => !j.fairness);
  if (plain.length === 0) return params;
  const fair = await fairQueuesAmong(ctx, ctx.db, [...new Set(plain.map((j) => j.queue))]);
  // A queue this batch makes fair is fair for the batch's jobs without a key too.
  for (const j of params.jobs) if (j.fairness) fair.add(j.queue);
  if (fair.size === 0) return params;
  return { ...params, jobs: params.jobs.map((j) => (j.fairness || !fair.has(j.queue) ? j : { ...j, fairness: IMPLICIT_FAIRNESS })) };
}

/** The columns a new row does not set (`rowsOf`): all null until a claim, an outcome or a handler writes them. */
const UNSET_COLUMNS = { lease_token: null, lease_expires_at: null, result: null, progress: null, worker: null, errors: null } as const;

/** One row without RETURNING: one autocommit INSERT; its record is the values written and the id it got, announced in the background. */
async function insertOneRow(ctx: StoreContext, db: AnyDb, row: Record<string, unknown>, background: (work: Promise<void>) => void): Promise<JobRecord> {
  const res = await labelled(db.insertInto(ctx.tables.jobs).values(row), "enqueue").executeTakeFirstOrThrow();
  const record = rowToRecord({ ...UNSET_COLUMNS, ...(row as Omit<JobRow, "id">), id: Number(res.insertId) });
  announceAfter(ctx, [record], background);
  return record;
}

/**
 * Announces `records`' ready queues after the autocommit write that stored
 * them (on the next turn: after the claims of this process's workers that
 * the enqueue wakes), through the store's notice window; a failed send is
 * reported in the background, not thrown (workers still poll).
 */
function announceAfter(ctx: StoreContext, records: readonly JobRecord[], background: (work: Promise<void>) => void): void {
  const notices = readyQueues(records);
  if (notices.length > 0) background(nextTurn().then(() => ctx.notices.announce(notices)));
}

/** The statement notice an autocommit single insert of `row` carries: the engine's, when the row is ready and the notice window lets it. */
function carried(ctx: StoreContext, row: Record<string, unknown>): Engine["statementNotice"] {
  const notice = ctx.engine.statementNotice;
  return notice && row.state === "ready" && ctx.notices.carry({ queue: row.queue as string, due: false }) ? notice : undefined;
}

function rowsOf(params: EnqueueParams): Record<string, unknown>[] {
  const { now } = params;
  return params.jobs.map((j) => ({
    task: j.task,
    queue: j.queue,
    payload: j.payload,
    state: j.state as JobState,
    priority: j.priority,
    run_at: j.runAt,
    attempt: 0,
    max_attempts: j.maxAttempts,
    backoff: j.backoff,
    concurrency_key: j.concurrency?.key ?? null,
    on_conflict: j.concurrency?.onConflict ?? null,
    rate_key: j.rateLimit?.key ?? null,
    fair_key: j.fairness?.key || null,
    fair_tag: null as number | null,
    timeout_ms: j.timeoutMs ?? null,
    idempotency_key: j.idempotencyKey ?? null,
    debounce_key: j.debounce?.key ?? null,
    trace_context: j.traceContext ?? null,
    created_at: now,
    updated_at: now,
    finished_at: null as number | null,
    last_error: null as string | null,
  }));
}

/**
 * A batch with keyed, rate-keyed, fairness-keyed or idempotent jobs, inside
 * its transaction. Fairness keys (see `storeFairKeys`) and rate keys'
 * limits (see `storeRateKeys`) are stored first. Without
 * idempotency keys: the batch's concurrency keys are upserted and locked in
 * one statement, made exact and counted in bulk (`promote`), each job is
 * admitted by the core's `admit` in batch order, and all are inserted
 * together: a bounded number of statements per batch, whatever its jobs and
 * keys. With idempotency keys: keys whose hold ran out are released, the
 * concurrency keys are locked and made exact the same way, then each job is
 * looked up by its idempotency key, admitted, and inserted, one by one.
 * A debounced job takes the one-by-one path too: it merges into its key's
 * pending job or is inserted (`mergeOrInsert`), so a later job of the batch
 * with its key merges into it. (A merge is an UPDATE: a call refused for an
 * idempotency conflict deletes the jobs it inserted but does not undo a
 * merge it made, which matters only in a caller's transaction that commits
 * anyway.)
 */
async function insertAdmitted(ctx: StoreContext, db: AnyDb, params: EnqueueParams, values: Record<string, unknown>[]): Promise<EnqueuedRecord[]> {
  const { now } = params;
  const idempotencyKeys = [...new Set(params.jobs.map((j) => j.idempotencyKey).filter((k): k is string => typeof k === "string"))];
  if (idempotencyKeys.length > 0 && params.keysReleasedBefore !== undefined) await releaseKeys(ctx, db, idempotencyKeys, params.keysReleasedBefore);
  // Fairness keys first, then rate keys, each in name order: every enqueue locks them in this order (claims lock no fairness key).
  await storeFairKeys(ctx, db, params.jobs, values);
  await storeRateKeys(ctx, db, params.jobs);
  // The stored limit of a key named twice is the last job's.
  const limits = new Map<string, number>();
  for (const j of params.jobs) if (j.concurrency) limits.set(j.concurrency.key, j.concurrency.limit);
  let holders = new Map<string, number>();
  if (limits.size > 0) {
    await upsertKeys(ctx, db, limits);
    const made = await promote(ctx, db, limits, now);
    holders = made.holders;
    await ctx.engine.announceReady(db, [...made.queues].map((queue) => ({ queue, due: false })));
  }
  const admitted = (i: number) => {
    const job = params.jobs[i]!;
    const row = values[i]!;
    if (!job.concurrency || job.state !== "ready") return row;
    const held = holders.get(job.concurrency.key) ?? 0;
    const decision = admit(held, job.concurrency.limit, job.concurrency.onConflict);
    if (decision === "ready") holders.set(job.concurrency.key, held + 1);
    if (decision === "blocked") row.state = "blocked";
    if (decision === "discarded") {
      row.state = "cancelled";
      row.finished_at = now;
      row.last_error = discardReason(job.concurrency.key, job.concurrency.limit);
    }
    return row;
  };
  const debounced = params.jobs.some((j) => j.debounce);
  if (idempotencyKeys.length === 0 && !debounced) {
    const rows = values.map((_, i) => admitted(i));
    const runs = ctx.engine.capabilities.arrays ? arrayRuns(params.jobs) : [];
    if (runs.length !== 1) return (await insertRows(ctx, db, rows)).map(created);
    // With arrays, a batch of ordinary size: one statement, its records the values written and the ids the rows got.
    const ids = await insertAdmittedRows(ctx, db, rows, now);
    return params.jobs.map((job, i) => {
      const row = rows[i]!;
      const record = created(newJobRecord(ids[i]!, job, now));
      record.state = row.state as JobState;
      record.finishedAt = row.finished_at as number | null;
      record.lastError = row.last_error as string | null;
      return record;
    });
  }
  const records: EnqueuedRecord[] = [];
  for (const [i, job] of params.jobs.entries()) {
    if (job.debounce) {
      records.push(await mergeOrInsert(ctx, db, values[i]!, job.debounce, now, async (row) => (await insertRows(ctx, db, [row]))[0]!));
      continue;
    }
    const key = job.idempotencyKey ?? null;
    const holder = key === null ? null : await holderOf(ctx, db, key);
    if (holder) {
      if (holder.task !== job.task) await refuse(ctx, db, records, key!, job.task, holder);
      records.push({ ...holder, created: false });
      continue;
    }
    const counted = job.concurrency ? (holders.get(job.concurrency.key) ?? 0) : 0;
    const row = admitted(i);
    const record = key === null ? created((await insertRows(ctx, db, [row]))[0]!) : await insertOrGetHolder(ctx, db, row, key);
    if (!record.created && record.task !== job.task) await refuse(ctx, db, records, key!, job.task, record);
    // A concurrent holder of the idempotency key got in first: this job was not stored and holds no slot.
    if (!record.created && job.concurrency) holders.set(job.concurrency.key, counted);
    records.push(record);
  }
  return records;
}

/**
 * Refuses the call: `holder` holds idempotency key `key`, which a job of
 * `task`, another task, named. First deletes the rows this call inserted (`records` so far),
 * so that nothing of it remains even in a caller's transaction that commits
 * anyway; then throws IdempotencyConflictError.
 */
async function refuse(ctx: StoreContext, db: AnyDb, records: readonly EnqueuedRecord[], key: string, task: string, holder: JobRecord): Promise<never> {
  const mine = records.filter((r) => r.created).map((r) => r.id);
  for (let i = 0; i < mine.length; i += BATCH_ROWS) {
    await db.deleteFrom(ctx.tables.jobs).where("id", "in", mine.slice(i, i + BATCH_ROWS)).execute();
  }
  throw new IdempotencyConflictError(key, task, { id: mine.includes(holder.id) ? null : holder.id, task: holder.task });
}

/** The job that holds idempotency key `key` (as this transaction sees it), or null. */
export async function holderOf(ctx: StoreContext, db: AnyDb, key: string): Promise<JobRecord | null> {
  const row = (await db.selectFrom(ctx.tables.jobs).selectAll().where("idempotency_key", "=", key).executeTakeFirst()) as JobRow | undefined;
  return row ? rowToRecord(row) : null;
}

/**
 * Inserts `row`, unless a concurrent call holds `key` by then: the insert
 * waits for that call's transaction, and when it committed, the record is
 * its job (`created: false`). Never surfaces the key's uniqueness violation.
 */
async function insertOrGetHolder(ctx: StoreContext, db: AnyDb, row: Record<string, unknown>, key: string): Promise<EnqueuedRecord> {
  const { tables, engine } = ctx;
  for (let attempt = 1; ; attempt++) {
    let inserted: JobRecord | null = null;
    if (engine.capabilities.onConflict) {
      // ON CONFLICT DO NOTHING waits for a concurrent holder's transaction, then skips the row if it committed.
      const insert = db
        .insertInto(tables.jobs)
        .values(row)
        .onConflict((oc) => oc.column("idempotency_key").where("idempotency_key", "is not", null).doNothing())
        .returningAll();
      const rows = (await labelled(insert, "enqueue").execute()) as JobRow[];
      inserted = rows[0] ? rowToRecord(rows[0]) : null;
    } else {
      // No ON CONFLICT: the engine must keep the transaction usable after a duplicate key (MySQL rolls back the statement only).
      try {
        inserted = (await insertRows(ctx, db, [row]))[0]!;
      } catch (error) {
        if (!engine.isUniqueViolation(error)) throw error;
      }
    }
    if (inserted) return created(inserted);
    const holder = await holderOf(ctx, db, key);
    if (holder) return { ...holder, created: false };
    // The holder was deleted (purged) or gave its key up between the two statements: try again.
    if (attempt >= 3) throw new AdapterError(`${engine.name}: idempotency key ${JSON.stringify(key)} kept changing hands; nothing was stored`);
  }
}

/** Takes the idempotency keys `keys` from finished jobs that finished at or before `finishedBefore`: they no longer hold them. */
async function releaseKeys(ctx: StoreContext, db: AnyDb, keys: readonly string[], finishedBefore: number): Promise<void> {
  await db
    .updateTable(ctx.tables.jobs)
    .set({ idempotency_key: null })
    .where("idempotency_key", "in", [...keys])
    .where("state", "in", TERMINAL_STATES)
    .where("finished_at", "<=", finishedBefore)
    .execute();
}

/**
 * Inserts one row with RETURNING, by a statement compiled once (the row's
 * values are its slots); on the store's own kysely instance. With `notice`,
 * the same statement announces the row's queue as ready when it commits.
 */
async function insertOne(ctx: StoreContext, db: AnyDb, row: Record<string, unknown>, notice?: Engine["statementNotice"]): Promise<JobRecord[]> {
  const columns = Object.keys(row);
  const build = () => {
    const insert = ctx.db.insertInto(ctx.tables.jobs).values(Object.fromEntries(columns.map((c) => [c, new Slot(c)]))).returningAll();
    if (!notice) return labelled(insert, "enqueue");
    const announced = ctx.db
      .with("inserted", () => insert)
      .selectFrom("inserted")
      .selectAll()
      .select(notice.expression(new Slot(NOTICE_SLOT)).as("announced"));
    return labelled(announced, "enqueue");
  };
  const key = `insert:${notice ? "announced:" : ""}${columns.join(",")}`;
  const values = notice ? { ...row, [NOTICE_SLOT]: notice.payload({ queue: row.queue as string, due: false }) } : row;
  const rows = (await db.executeQuery(compiledOnce(ctx.statements, key, build, values, ctx.engine.prepare))).rows as JobRow[];
  if (rows.length !== 1) throw new AdapterError(`${ctx.engine.name}: inserted ${rows.length} of 1 jobs`);
  return rows.map(rowToRecord);
}

/** The slot of a ready notice's payload in `insertOne` (not a column name). */
const NOTICE_SLOT = " notice";

/** Inserts rows (in this order) and returns their records; inside the caller's unit of work. */
async function insertRows(ctx: StoreContext, db: AnyDb, values: Record<string, unknown>[]): Promise<JobRecord[]> {
  const { tables, engine } = ctx;
  const rows: JobRow[] = [];
  // Runs of rows that fit in one statement each (see Engine.maxStatementBytes).
  const chunks = chunkRows(values, BATCH_ROWS, engine.maxStatementBytes ? await engine.maxStatementBytes(db) : null);
  if (engine.capabilities.returning || (await engine.insertReturning?.(db))) {
    for (const chunk of chunks) {
      // Sent as a query (not through kysely's insert, which drops RETURNING's rows on a dialect without it everywhere).
      const inserted = (await db.executeQuery(labelled(db.insertInto(tables.jobs).values(chunk).returningAll(), "enqueue").compile())).rows as JobRow[];
      rows.push(...inserted.sort((a, b) => Number(a.id) - Number(b.id)));
    }
  } else {
    const step = await engine.consecutiveInsertIds(db);
    const ids: number[] = [];
    if (step !== null) {
      // One multi-row INSERT per chunk: its rows get ids first, first + step, … (see Engine.consecutiveInsertIds).
      for (const chunk of chunks) {
        const first = Number((await labelled(db.insertInto(tables.jobs).values(chunk), "enqueue").executeTakeFirstOrThrow()).insertId);
        for (let k = 0; k < chunk.length; k++) ids.push(first + k * step);
      }
    } else {
      for (const v of values) {
        const res = await labelled(db.insertInto(tables.jobs).values(v), "enqueue").executeTakeFirstOrThrow();
        ids.push(Number(res.insertId));
      }
    }
    rows.push(...(await rowsByIds(ctx, db, ids)));
    // The ids were computed: each row read back must be the one inserted at that position.
    rows.forEach((r, k) => {
      const v = values[k]!;
      if (r.task !== v.task || r.queue !== v.queue || r.payload !== v.payload || Number(r.created_at) !== v.created_at) {
        throw new AdapterError(`${engine.name}: the ids of a batch insert were not the ones expected; nothing was stored`);
      }
    });
  }
  if (rows.length !== values.length) throw new AdapterError(`${engine.name}: inserted ${rows.length} of ${values.length} jobs`);
  return rows.map(rowToRecord);
}

/** One "ready" notice per distinct queue of the records that are ready. */
export function readyQueues(records: readonly JobRecord[]): { queue: string; due: boolean }[] {
  return [...new Set(records.filter((r) => r.state === "ready").map((r) => r.queue))].map((queue) => ({ queue, due: false }));
}
