import { sql } from "kysely";
import type { StatsParams, StoredStats } from "../../core/adapter.ts";
import type { JobState } from "../../core/states.ts";
import { SLOT_HOLDING_STATES, TERMINAL_STATES } from "../../core/states.ts";
import type { StoreContext } from "./context.ts";
import { rowToRecord, type JobRow } from "./row.ts";
import { RATE_COLUMNS } from "./rate-limits.ts";
import { rateLimitOf, type RateColumns } from "./controls.ts";

/**
 * See DocketAdapter.stats: fifteen read-only queries, each bounded by the
 * live jobs, the dead ones or those finished since `since`, never by the
 * whole history: every one has a state predicate that an index of every
 * engine serves (a partial index's predicate, or a state-leading index).
 */
export async function readStats(ctx: StoreContext, params: StatsParams): Promise<StoredStats> {
  const { db, tables } = ctx;
  type Count = { queue: string; task: string; state: JobState; n: number | string };
  const countBy = async (states: readonly JobState[], finishedSince?: number): Promise<Count[]> => {
    let q = db
      .selectFrom(tables.jobs)
      .select(["queue", "task", "state", sql<number>`count(*)`.as("n")])
      .where("state", "in", [...states]);
    // Finished jobs are reached through the finished index, whose rows all have finished_at.
    if (finishedSince !== undefined) q = q.where("finished_at", ">=", finishedSince);
    else if (states.every((st) => TERMINAL_STATES.includes(st))) q = q.where("finished_at", "is not", null);
    return (await q.groupBy(["queue", "task", "state"]).execute()) as Count[];
  };
  const counts = [
    ...(await countBy(["ready", "scheduled"])),
    ...(await countBy(["running"])),
    ...(await countBy(["blocked"])),
    ...(await countBy(["waiting"])),
    ...(await countBy(["dead"])),
    ...(await countBy(["succeeded", "cancelled"], params.since)),
  ];
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
  // Keys: slots in use (and of them, running) and blocked jobs per key, one query per state (each served by that state's index), merged here.
  const perKey = new Map<string, { holders: number; running: number; blocked: number }>();
  for (const state of [...SLOT_HOLDING_STATES, "blocked" as const]) {
    const rows = (await db
      .selectFrom(tables.jobs)
      .select(["concurrency_key as key", sql<number>`count(*)`.as("n")])
      .where("state", "=", state)
      .where("concurrency_key", "is not", null)
      .groupBy("concurrency_key")
      .execute()) as { key: string; n: number | string }[];
    for (const r of rows) {
      const k = perKey.get(r.key) ?? { holders: 0, running: 0, blocked: 0 };
      if (state === "blocked") k.blocked += Number(r.n);
      else k.holders += Number(r.n);
      if (state === "running") k.running += Number(r.n);
      perKey.set(r.key, k);
    }
  }
  const keyNames = [...perKey.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).slice(0, params.keysLimit);
  const limits = new Map<string, number>();
  if (keyNames.length > 0) {
    const rows = (await db.selectFrom(tables.keys).select(["name", "max_holders"]).where("name", "in", keyNames).execute()) as { name: string; max_holders: number | string }[];
    for (const r of rows) limits.set(r.name, Number(r.max_holders));
  }
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
  // Rate limits: queue and task limits with their ready jobs (counted above), rate keys with ready jobs first.
  const ready = (column: "queue" | "task", name: string) => counts.filter((c) => c.state === "ready" && c[column] === name).reduce((n, c) => n + Number(c.n), 0);
  const rateLimits: StoredStats["rateLimits"] = [];
  const limited = (scope: "queue" | "task" | "key", r: RateColumns & { name: string }, n: number) => {
    const limit = rateLimitOf(r);
    if (limit) rateLimits.push({ scope, name: r.name, ...limit, starts: r.rate_starts ?? null, ready: n });
  };
  for (const [scope, table] of [["queue", tables.queues], ["task", tables.tasks]] as const) {
    const rows = (await db.selectFrom(table).select(["name", ...RATE_COLUMNS]).where("rate_limit", "is not", null).orderBy("name").execute()) as (RateColumns & { name: string })[];
    for (const r of rows) limited(scope, r, ready(scope, r.name));
  }
  const keyReady = (await db
    .selectFrom(tables.jobs)
    .select(["rate_key as key", sql<number>`count(*)`.as("n")])
    .where("state", "=", "ready")
    .where("rate_key", "is not", null)
    .groupBy("rate_key")
    .execute()) as { key: string; n: number | string }[];
  const waitingKeys = keyReady.map((r) => r.key).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).slice(0, params.keysLimit);
  let keyRows = waitingKeys.length === 0 ? [] : ((await db.selectFrom(tables.rateKeys).select(["name", ...RATE_COLUMNS]).where("name", "in", waitingKeys).orderBy("name").execute()) as (RateColumns & { name: string })[]);
  if (keyRows.length < params.keysLimit) {
    let others = db.selectFrom(tables.rateKeys).select(["name", ...RATE_COLUMNS]).orderBy("name").limit(params.keysLimit - keyRows.length);
    if (waitingKeys.length > 0) others = others.where("name", "not in", waitingKeys);
    keyRows = [...keyRows, ...((await others.execute()) as (RateColumns & { name: string })[])];
  }
  for (const r of keyRows) limited("key", r, Number(keyReady.find((k) => k.key === r.name)?.n ?? 0));
  return {
    rateLimits,
    counts: counts.map((c) => ({ queue: c.queue, task: c.task, state: c.state, count: Number(c.n) })),
    oldestReady: oldest.map((o) => ({ queue: o.queue, runAt: Number(o.run_at) })),
    running: running.map(rowToRecord),
    keys: keyNames.map((key) => ({ key, limit: limits.get(key) ?? null, ...perKey.get(key)! })),
    finished: finished.map((f) => ({ state: f.state, bucket: Number(f.bucket), count: Number(f.n) })),
  };
}
