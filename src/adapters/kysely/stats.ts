import { sql } from "kysely";
import type { StatsParams, StoredStats } from "../../core/adapter.ts";
import type { JobState } from "../../core/states.ts";
import { SLOT_HOLDING_STATES, TERMINAL_STATES } from "../../core/states.ts";
import type { StoreContext } from "./context.ts";
import { rowToRecord, type JobRow } from "./row.ts";

/**
 * See DocketAdapter.stats: five read-only queries. The counts read every
 * job once (retention keeps the table to live jobs and a window of
 * finished ones); the others read index ranges: ready jobs per queue,
 * running jobs by lease expiry, keyed live jobs, jobs finished since
 * `since` (the finished index).
 */
export async function readStats(ctx: StoreContext, params: StatsParams): Promise<StoredStats> {
  const { db, tables } = ctx;
  const counts = (await db
    .selectFrom(tables.jobs)
    .select(["queue", "task", "state", sql<number>`count(*)`.as("n")])
    .groupBy(["queue", "task", "state"])
    .execute()) as { queue: string; task: string; state: JobState; n: number | string }[];
  const oldest = (await db
    .selectFrom(tables.jobs)
    .select(["queue", sql<number>`min(run_at)`.as("run_at")])
    .where("state", "=", "ready")
    .groupBy("queue")
    .execute()) as { queue: string; run_at: number | string }[];
  const running = (await db
    .selectFrom(tables.jobs)
    .selectAll()
    .where("state", "=", "running")
    .orderBy("lease_expires_at")
    .orderBy("id")
    .limit(params.runningLimit)
    .execute()) as JobRow[];
  const keys = (await db
    .selectFrom(`${tables.jobs} as j`)
    .leftJoin(`${tables.keys} as k`, "k.name", "j.concurrency_key")
    .select([
      "j.concurrency_key as key",
      "k.max_holders as max_holders",
      sql<number>`sum(case when j.state in (${sql.join(SLOT_HOLDING_STATES)}) then 1 else 0 end)`.as("holders"),
      sql<number>`sum(case when j.state = 'blocked' then 1 else 0 end)`.as("blocked"),
    ])
    .where("j.concurrency_key", "is not", null)
    .where("j.state", "in", [...SLOT_HOLDING_STATES, "blocked"])
    .groupBy(["j.concurrency_key", "k.max_holders"])
    .orderBy("j.concurrency_key")
    .limit(params.keysLimit)
    .execute()) as { key: string; max_holders: number | string | null; holders: number | string; blocked: number | string }[];
  // Integer arithmetic on epoch milliseconds: the bucket's start, in every engine's SQL; a literal (a validated integer), so
  // that PostgreSQL sees the same expression in SELECT and GROUP BY.
  const bucket = sql<number>`(finished_at - (finished_at % ${sql.lit(Math.trunc(params.bucketMs))}))`;
  const finished = (await db
    .selectFrom(tables.jobs)
    .select(["state", bucket.as("bucket"), sql<number>`count(*)`.as("n")])
    .where("state", "in", TERMINAL_STATES)
    .where("finished_at", ">=", params.since)
    .groupBy(["state", bucket])
    .execute()) as { state: JobState; bucket: number | string; n: number | string }[];
  return {
    counts: counts.map((c) => ({ queue: c.queue, task: c.task, state: c.state, count: Number(c.n) })),
    oldestReady: oldest.map((o) => ({ queue: o.queue, runAt: Number(o.run_at) })),
    running: running.map(rowToRecord),
    keys: keys.map((k) => ({ key: k.key, limit: k.max_holders === null ? null : Number(k.max_holders), holders: Number(k.holders), blocked: Number(k.blocked) })),
    finished: finished.map((f) => ({ state: f.state, bucket: Number(f.bucket), count: Number(f.n) })),
  };
}
