import { WORKER_ROWS_KEPT_MS, type WorkerRecord } from "../../core/adapter.ts";
import type { StoreContext } from "./context.ts";

interface WorkerRow {
  id: string;
  name: string;
  host: string;
  pid: number | string;
  queues: string;
  concurrency: number | string;
  started_at: number | string | bigint;
  heartbeat_at: number | string | bigint;
  expires_at: number | string | bigint;
  jobs_in_hand: number | string;
}

const toColumns = (w: WorkerRecord) => ({
  name: w.name,
  host: w.host,
  pid: w.pid,
  queues: w.queues,
  concurrency: w.concurrency,
  started_at: w.startedAt,
  heartbeat_at: w.heartbeatAt,
  expires_at: w.expiresAt,
  jobs_in_hand: w.jobsInHand,
});

/**
 * See DocketAdapter.putWorker: an UPDATE of the worker's own row (a
 * heartbeat: one statement), or, when there is none (a registration, or a
 * row pruned after it expired), the prune of long-expired rows and the
 * INSERT. Only that worker writes the row, so the two never race each
 * other; a duplicate key (an UPDATE that changed nothing on MySQL, which
 * counts changed rows) is the row in place.
 */
export async function putWorker(ctx: StoreContext, w: WorkerRecord): Promise<void> {
  const { db, engine, tables } = ctx;
  const updated = await engine.writeStatement(db, (d) => d.updateTable(tables.workers).set(toColumns(w)).where("id", "=", w.id).executeTakeFirst());
  if (Number(updated.numUpdatedRows) > 0) return;
  await engine.writeStatement(db, (d) => d.deleteFrom(tables.workers).where("expires_at", "<", w.heartbeatAt - WORKER_ROWS_KEPT_MS).execute());
  try {
    await engine.writeStatement(db, (d) => d.insertInto(tables.workers).values({ id: w.id, ...toColumns(w) }).execute());
  } catch (error) {
    if (!engine.isUniqueViolation(error)) throw error;
  }
}

export async function removeWorker(ctx: StoreContext, id: string): Promise<void> {
  await ctx.engine.writeStatement(ctx.db, (d) => d.deleteFrom(ctx.tables.workers).where("id", "=", id).execute());
}

export async function listWorkers(ctx: StoreContext, p: { now: number; limit: number }): Promise<WorkerRecord[]> {
  const rows = (await ctx.db.selectFrom(ctx.tables.workers).selectAll().where("expires_at", ">", p.now).orderBy("name").orderBy("id").limit(p.limit).execute()) as WorkerRow[];
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    host: r.host,
    pid: Number(r.pid),
    queues: r.queues,
    concurrency: Number(r.concurrency),
    startedAt: Number(r.started_at),
    heartbeatAt: Number(r.heartbeat_at),
    expiresAt: Number(r.expires_at),
    jobsInHand: Number(r.jobs_in_hand),
  }));
}
