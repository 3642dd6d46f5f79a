import { sql } from "kysely";
import type { CountParams, ListExpiredParams, ListParams } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { TRANSITIONS } from "../../core/transitions.ts";
import type { StoreContext } from "./context.ts";
import { rowToRecord, type JobRow } from "./row.ts";

/** See DocketAdapter.get. */
export async function getJob(ctx: StoreContext, id: number): Promise<JobRecord | null> {
  const row = (await ctx.db.selectFrom(ctx.tables.jobs).selectAll().where("id", "=", id).executeTakeFirst()) as JobRow | undefined;
  return row ? rowToRecord(row) : null;
}

/** `q` narrowed by the filters given. */
// deno-lint-ignore no-explicit-any
function filtered<Q extends { where(...args: any[]): Q }>(q: Q, params: CountParams): Q {
  if (params.state !== undefined) q = q.where("state", "=", params.state);
  if (params.queue !== undefined) q = q.where("queue", "=", params.queue);
  if (params.task !== undefined) q = q.where("task", "=", params.task);
  if (params.concurrencyKey !== undefined) q = q.where("concurrency_key", "=", params.concurrencyKey);
  return q;
}

/** See DocketAdapter.countJobs. */
export async function countJobs(ctx: StoreContext, params: CountParams): Promise<number> {
  const row = (await filtered(ctx.db.selectFrom(ctx.tables.jobs), params).select((eb) => eb.fn.countAll().as("n")).executeTakeFirst()) as { n: number | string | bigint } | undefined;
  return Number(row?.n ?? 0);
}

/** `text` as a LIKE pattern under `ESCAPE '!'` that matches it anywhere, literally: each `%`, `_` and `!` escaped (a backslash is a plain character). */
export function containsPattern(text: string): string {
  return `%${text.replace(/[%_!]/g, "!$&")}%`;
}

/** The jobs whose last error contains `text` (see ListParams.errorContains), in the engine's way or by LIKE. */
function lastErrorContains(ctx: StoreContext, text: string) {
  return ctx.engine.containsText?.("last_error", text) ?? sql<boolean>`last_error like ${containsPattern(text)} escape '!'`;
}

/** See DocketAdapter.list. */
export async function listJobs(ctx: StoreContext, params: ListParams): Promise<JobRecord[]> {
  let q = filtered(ctx.db.selectFrom(ctx.tables.jobs).selectAll(), params);
  if (params.errorContains !== undefined) q = q.where(lastErrorContains(ctx, params.errorContains));
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
