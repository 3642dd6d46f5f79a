/**
 * The memory adapter's read-only calls: one job, a filtered page of jobs,
 * expired leases, and the operators' stats snapshot, each as the SQL
 * adapters answer it (same filters, orders, limits and groupings), and each
 * returning copies.
 */
import type { CountParams, ListParams, StatsParams, StoredStats } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { SLOT_HOLDING_STATES, TERMINAL_STATES, type JobState } from "../../core/states.ts";
import { TRANSITIONS } from "../../core/transitions.ts";
import { byName, copy, type MemoryState } from "./state.ts";

/** See DocketAdapter.get. */
export function getJob(state: MemoryState, id: number): JobRecord | null {
  const job = state.jobs.get(id);
  return job ? copy(job) : null;
}

/** See DocketAdapter.countJobs. */
export function countJobs(state: MemoryState, p: CountParams): number {
  let n = 0;
  for (const j of state.jobs.values()) {
    if (p.state !== undefined && j.state !== p.state) continue;
    if (p.queue !== undefined && j.queue !== p.queue) continue;
    if (p.task !== undefined && j.task !== p.task) continue;
    if (p.concurrencyKey !== undefined && j.concurrencyKey !== p.concurrencyKey) continue;
    n++;
  }
  return n;
}

/** See DocketAdapter.list: by id ascending. */
export function listJobs(state: MemoryState, p: ListParams): JobRecord[] {
  const out: JobRecord[] = [];
  if (p.limit <= 0) return out;
  const among = p.ids === undefined ? [...state.jobs.values()] : [...new Set(p.ids)].flatMap((id) => state.jobs.get(id) ?? []);
  for (const j of among.sort((a, b) => a.id - b.id)) {
    if (p.state !== undefined && j.state !== p.state) continue;
    if (p.queue !== undefined && j.queue !== p.queue) continue;
    if (p.task !== undefined && j.task !== p.task) continue;
    if (p.concurrencyKey !== undefined && j.concurrencyKey !== p.concurrencyKey) continue;
    if (p.errorContains !== undefined && !(j.lastError ?? "").includes(p.errorContains)) continue;
    if (p.afterId !== undefined && j.id <= p.afterId) continue;
    out.push(copy(j));
    if (out.length >= p.limit) break;
  }
  return out;
}

/** See DocketAdapter.listExpired: running jobs whose lease ran out by `now`, oldest expiry first. */
export function listExpired(state: MemoryState, p: { now: number; limit: number }): JobRecord[] {
  const from: readonly JobState[] = TRANSITIONS.expireRetry.from;
  return [...state.jobs.values()]
    .filter((j) => from.includes(j.state) && j.leaseExpiresAt !== null && j.leaseExpiresAt <= p.now)
    .sort((a, b) => a.leaseExpiresAt! - b.leaseExpiresAt! || a.id - b.id)
    .slice(0, Math.max(0, p.limit))
    .map(copy);
}

/** See DocketAdapter.stats. */
export function readStats(state: MemoryState, p: StatsParams): StoredStats {
  const counts = new Map<string, { queue: string; task: string; state: JobState; count: number }>();
  const oldest = new Map<string, number>();
  const perKey = new Map<string, { holders: number; running: number; blocked: number }>();
  const finished = new Map<string, { state: JobState; bucket: number; count: number }>();
  const running: JobRecord[] = [];
  const bucketMs = Math.trunc(p.bucketMs);
  for (const j of state.jobs.values()) {
    const terminal = TERMINAL_STATES.includes(j.state);
    // Succeeded and cancelled jobs count when they finished since `since`; every other state always counts.
    const counted = j.state === "succeeded" || j.state === "cancelled" ? j.finishedAt !== null && j.finishedAt >= p.since : !terminal || j.finishedAt !== null;
    if (counted) {
      const k = `${j.queue}\u0000${j.task}\u0000${j.state}`;
      const c = counts.get(k) ?? { queue: j.queue, task: j.task, state: j.state, count: 0 };
      c.count++;
      counts.set(k, c);
    }
    if (j.state === "ready") oldest.set(j.queue, Math.min(oldest.get(j.queue) ?? Infinity, j.runAt));
    if (j.state === "running") running.push(j);
    if (j.concurrencyKey !== null && (SLOT_HOLDING_STATES.includes(j.state) || j.state === "blocked")) {
      const k = perKey.get(j.concurrencyKey) ?? { holders: 0, running: 0, blocked: 0 };
      if (j.state === "blocked") k.blocked++;
      else k.holders++;
      if (j.state === "running") k.running++;
      perKey.set(j.concurrencyKey, k);
    }
    if (terminal && j.finishedAt !== null && j.finishedAt >= p.since) {
      const bucket = j.finishedAt - (j.finishedAt % bucketMs);
      const k = `${j.state}\u0000${bucket}`;
      const f = finished.get(k) ?? { state: j.state, bucket, count: 0 };
      f.count++;
      finished.set(k, f);
    }
  }
  const keyNames = [...perKey.keys()].sort(byName).slice(0, Math.max(0, p.keysLimit));
  const readyOf = (f: (j: JobRecord) => boolean) => [...state.jobs.values()].filter((j) => j.state === "ready" && f(j)).length;
  const rateLimits: StoredStats["rateLimits"] = [];
  const log = (id: string) => (state.rateLogs.has(id) ? JSON.stringify(state.rateLogs.get(id)) : null);
  for (const c of [...state.queues.values()].sort((a, b) => byName(a.queue, b.queue))) {
    if (c.rateLimit) rateLimits.push({ scope: "queue", name: c.queue, ...c.rateLimit, starts: log(`queue:${c.queue}`), ready: readyOf((j) => j.queue === c.queue) });
  }
  for (const c of [...state.tasks.values()].sort((a, b) => byName(a.task, b.task))) {
    if (c.rateLimit) rateLimits.push({ scope: "task", name: c.task, ...c.rateLimit, starts: log(`task:${c.task}`), ready: readyOf((j) => j.task === c.task) });
  }
  const keyReady = new Map<string, number>();
  for (const j of state.jobs.values()) if (j.state === "ready" && j.rateKey !== null) keyReady.set(j.rateKey, (keyReady.get(j.rateKey) ?? 0) + 1);
  const waiting = [...keyReady.keys()].sort(byName).slice(0, Math.max(0, p.keysLimit));
  const others = [...state.rateKeys.keys()].filter((k) => !keyReady.has(k)).sort(byName);
  for (const key of [...waiting, ...others].slice(0, Math.max(0, p.keysLimit))) {
    const limit = state.rateKeys.get(key);
    if (limit) rateLimits.push({ scope: "key", name: key, ...limit, starts: log(`key:${key}`), ready: keyReady.get(key) ?? 0 });
  }
  return {
    rateLimits,
    counts: [...counts.values()],
    oldestReady: [...oldest].map(([queue, runAt]) => ({ queue, runAt })),
    running: running
      .sort((a, b) => (a.leaseExpiresAt ?? 0) - (b.leaseExpiresAt ?? 0) || a.id - b.id)
      .slice(0, Math.max(0, p.runningLimit))
      .map(copy),
    keys: keyNames.map((key) => ({ key, limit: state.keyLimits.get(key) ?? null, ...perKey.get(key)! })),
    finished: [...finished.values()],
  };
}
