import type { ListExpiredParams, ListParams } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { TRANSITIONS } from "../../core/transitions.ts";
import type { StoreContext } from "./context.ts";
import { rowToRecord, type JobRow } from "./row.ts";

/** See DocketAdapter.get. */
export async function getJob(ctx: StoreContext, id: number): Promise<JobRecord | null> {
  const row = (await ctx.db.selectFrom(ctx.tables.jobs).selectAll().where("id", "=", id).executeTakeFirst()) as JobRow | undefined;
  return row ? rowToRecord(row) : null;
}

/** See DocketAdapter.list. */
export async function listJobs(ctx: StoreContext, params: ListParams): Promise<JobRecord[]> {
  let q = ctx.db.selectFrom(ctx.tables.jobs).selectAll();
  if (params.state !== undefined) q = q.where("state", "=", params.state);
  if (params.queue !== undefined) q = q.where("queue", "=", params.queue);
  if (params.task !== undefined) q = q.where("task", "=", params.task);
  if (params.concurrencyKey !== undefined) q = q.where("concurrency_key", "=", params.concurrencyKey);
  if (params.afterId !== undefined) q = q.where("id", ">", params.afterId);
  if (params.ids !== undefined) {
    if (params.ids.length === 0) return [];
    q = q.where("id", "in", [...params.ids]);
  }
  const rows = (await q.orderBy("id").limit(params.limit).execute()) as JobRow[];
  return rows.map(rowToRecord);
}

/** See DocketAdapter.listExpired: running jobs whose lease ran out, oldest expiry first. */
export async function listExpired(ctx: StoreContext, params: ListExpiredParams): Promise<JobRecord[]> {
  const rows = (await ctx.db
    .selectFrom(ctx.tables.jobs)
    .selectAll()
    .where("state", "in", TRANSITIONS.expireRetry.from)
    .where("lease_expires_at", "<=", params.now)
    .orderBy("lease_expires_at")
    .orderBy("id")
    .limit(params.limit)
    .execute()) as JobRow[];
  return rows.map(rowToRecord);
}
