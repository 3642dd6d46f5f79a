import type { EnqueueParams } from "../../core/adapter.ts";
import { AdapterError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import type { JobState } from "../../core/states.ts";
import { admit, discardReason } from "../../core/concurrency.ts";
import type { AnyDb } from "./engine.ts";
import { BATCH_ROWS, type StoreContext } from "./context.ts";
import { countHolders, lockKey, rebalance } from "./admission.ts";
import { rowToRecord, type JobRow } from "./row.ts";

/**
 * Stores new jobs, all or none, and returns their records in input order.
 * Keyed jobs are admitted under their keys' locks (ready, blocked, or
 * cancelled by a "discard" policy). Ready jobs are announced to other
 * processes once stored. See DocketAdapter.enqueue.
 */
export async function enqueue(ctx: StoreContext, params: EnqueueParams, report: (error: unknown) => void): Promise<JobRecord[]> {
  if (params.jobs.length === 0) return [];
  const { db, engine } = ctx;
  const values = rowsOf(params);
  const keyed = params.jobs.some((j) => j.concurrency);
  if (!keyed && values.length <= BATCH_ROWS && engine.capabilities.returning) {
    // One INSERT … RETURNING is atomic on its own: no transaction (on PostgreSQL, no BEGIN/COMMIT round trips).
    const records = await engine.writeStatement(db, (w) => insertRows(ctx, w, values));
    // The jobs are stored: the notice is sent without holding up the caller, and one that fails is
    // reported, not thrown (workers still find the jobs by polling).
    void engine.announceReady(db, readyQueues(records)).catch(report);
    return records;
  }
  return engine.writeTransaction(db, async (trx) => {
    const records = keyed ? await insertAdmitted(ctx, trx, params, values) : await insertRows(ctx, trx, values);
    await engine.announceReady(trx, readyQueues(records));
    return records;
  });
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
    timeout_ms: j.timeoutMs ?? null,
    created_at: now,
    updated_at: now,
    finished_at: null as number | null,
    last_error: null as string | null,
  }));
}

/** A batch with keyed jobs, inside its transaction: admission under each key's lock, then the rows, one by one. */
async function insertAdmitted(ctx: StoreContext, db: AnyDb, params: EnqueueParams, values: Record<string, unknown>[]): Promise<JobRecord[]> {
  const { now } = params;
  // Every key of the batch is locked up front, in name order, so concurrent batches cannot deadlock.
  const limits = new Map<string, number>();
  for (const j of params.jobs) if (j.concurrency) limits.set(j.concurrency.key, j.concurrency.limit);
  for (const name of [...limits.keys()].sort()) {
    await lockKey(ctx, db, name, limits.get(name)!);
    await rebalance(ctx, db, name, now);
  }
  const records: JobRecord[] = [];
  for (const [i, job] of params.jobs.entries()) {
    const row = values[i]!;
    if (job.concurrency && job.state === "ready") {
      const holders = await countHolders(ctx, db, job.concurrency.key);
      const decision = admit(holders, job.concurrency.limit, job.concurrency.onConflict);
      if (decision === "blocked") row.state = "blocked";
      if (decision === "discarded") {
        row.state = "cancelled";
        row.finished_at = now;
        row.last_error = discardReason(job.concurrency.key, job.concurrency.limit);
      }
    }
    records.push(...(await insertRows(ctx, db, [row])));
  }
  return records;
}

/** Inserts rows (in this order) and returns their records; inside the caller's unit of work. */
async function insertRows(ctx: StoreContext, db: AnyDb, values: Record<string, unknown>[]): Promise<JobRecord[]> {
  const { tables, engine } = ctx;
  const rows: JobRow[] = [];
  if (engine.capabilities.returning) {
    for (let i = 0; i < values.length; i += BATCH_ROWS) {
      const chunk = values.slice(i, i + BATCH_ROWS);
      const inserted = (await db.insertInto(tables.jobs).values(chunk).returningAll().execute()) as JobRow[];
      rows.push(...inserted.sort((a, b) => Number(a.id) - Number(b.id)));
    }
  } else {
    const step = await engine.consecutiveInsertIds(db);
    const ids: number[] = [];
    if (step !== null) {
      // One multi-row INSERT per chunk: its rows get ids first, first + step, … (see Engine.consecutiveInsertIds).
      for (let i = 0; i < values.length; i += BATCH_ROWS) {
        const chunk = values.slice(i, i + BATCH_ROWS);
        const first = Number((await db.insertInto(tables.jobs).values(chunk).executeTakeFirstOrThrow()).insertId);
        for (let k = 0; k < chunk.length; k++) ids.push(first + k * step);
      }
    } else {
      for (const v of values) {
        const res = await db.insertInto(tables.jobs).values(v).executeTakeFirstOrThrow();
        ids.push(Number(res.insertId));
      }
    }
    for (let i = 0; i < ids.length; i += BATCH_ROWS) {
      const chunk = ids.slice(i, i + BATCH_ROWS);
      rows.push(...((await db.selectFrom(tables.jobs).selectAll().where("id", "in", chunk).orderBy("id").execute()) as JobRow[]));
    }
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
