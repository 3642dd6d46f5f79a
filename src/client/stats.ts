/**
 * The operator's snapshot (`docket.stats()`): its shape, its options, and
 * how it is read (two adapter reads) and shaped (grouped per queue and
 * task, controls joined, throughput zero-filled).
 */
import type { DocketAdapter, QueueControl, StoredStats, TaskControl } from "../core/adapter.ts";
import type { Clock } from "../core/clock.ts";
import { InvalidArgumentError } from "../core/errors.ts";
import { JOB_STATES, type JobState } from "../core/states.ts";
import { checkKeys, validateInteger } from "../core/validate.ts";
import { nextRoomAt, readStarts, startsInWindow, type RateLimit } from "../core/rate-limit.ts";

export type StateCounts = Record<JobState, number>;

export interface QueueStats {
  queue: string;
  /** Jobs per state: all live and dead jobs; succeeded and cancelled, those finished within the window (`windowMs`). */
  counts: StateCounts;
  /** How long the oldest ready job of the queue has been due, in ms (0 when none is ready). */
  oldestReadyAgeMs: number;
  paused: boolean;
  /** The queue's cap, or null. */
  maxRunning: number | null;
  /** The queue's rate limit, or null (its use: `DocketStats.rateLimits`). */
  rateLimit: RateLimit | null;
}

export interface TaskStats {
  task: string;
  /** As QueueStats.counts. */
  counts: StateCounts;
  maxRunning: number | null;
  rateLimit: RateLimit | null;
}

/** A rate limit as it stands at the snapshot. */
export interface RateLimitStats {
  scope: "queue" | "task" | "key";
  /** The queue's, the task's or the rate key's name. */
  name: string;
  limit: number;
  periodMs: number;
  /** Starts inside the window that ends now. */
  used: number;
  /** Ready jobs it applies to (each waits for it unless another control holds it first). */
  waiting: number;
  /** When it next has room, while it has none (epoch ms); null while it has room. */
  nextStartAt: number | null;
}

export interface RunningJobStats {
  id: number;
  task: string;
  queue: string;
  attempt: number;
  concurrencyKey: string | null;
  /** The name of the worker holding it (WorkerOptions.name), or null when claimed without one. */
  worker: string | null;
  leaseExpiresAt: number;
  /** Negative once the lease expired (its worker stopped heartbeating; a sweep will reclaim it). */
  leaseExpiresInMs: number;
}

export interface KeyStats {
  key: string;
  limit: number | null;
  /** Jobs holding a slot (ready or running). */
  holders: number;
  /** Of the holders, those running (the others are ready). */
  running: number;
  /** Jobs waiting for a slot. */
  blocked: number;
}

export interface ThroughputBucket {
  /** The bucket's start (epoch ms); buckets are `bucketMs` long, oldest first, the last one still filling. */
  start: number;
  succeeded: number;
  dead: number;
  cancelled: number;
}

export interface DocketStats {
  /** When the snapshot was taken (the docket clock). */
  at: number;
  /** Every queue that has live or dead jobs, jobs finished within the window, or stored controls, by name. */
  queues: QueueStats[];
  tasks: TaskStats[];
  /** Running jobs, soonest lease expiry first (at most `runningLimit`). */
  running: RunningJobStats[];
  /** Keys with holders or blocked jobs, by name (at most `keysLimit`). */
  keys: KeyStats[];
  /** Every queue and task rate limit, then rate keys (those with ready jobs first; at most `keysLimit`). */
  rateLimits: RateLimitStats[];
  /** Jobs finished per bucket over the window, zeros included. */
  throughput: ThroughputBucket[];
  windowMs: number;
  bucketMs: number;
}

export interface StatsOptions {
  /** How far back throughput goes, ms. Default 15 minutes. */
  windowMs?: number;
  /** Throughput bucket length, ms. Default 1 minute. */
  bucketMs?: number;
  /** Most running jobs listed. Default 100. */
  runningLimit?: number;
  /** Most keys listed. Default 100. */
  keysLimit?: number;
}

/** @internal A zero for every state. */
export function emptyCounts(): StateCounts {
  return Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as StateCounts;
}

/** @internal The operator's view of what the adapter read: grouped per queue and task, controls joined, throughput zero-filled. */
export function shapeStats(
  stored: StoredStats,
  controls: { queues: QueueControl[]; tasks: TaskControl[] },
  o: { now: number; since: number; windowMs: number; bucketMs: number },
): DocketStats {
  const queues = new Map<string, QueueStats>();
  const tasks = new Map<string, TaskStats>();
  const queue = (name: string) => {
    let q = queues.get(name);
    if (!q) queues.set(name, (q = { queue: name, counts: emptyCounts(), oldestReadyAgeMs: 0, paused: false, maxRunning: null, rateLimit: null }));
    return q;
  };
  const task = (name: string) => {
    let t = tasks.get(name);
    if (!t) tasks.set(name, (t = { task: name, counts: emptyCounts(), maxRunning: null, rateLimit: null }));
    return t;
  };
  for (const c of stored.counts) {
    queue(c.queue).counts[c.state] += c.count;
    task(c.task).counts[c.state] += c.count;
  }
  for (const r of stored.oldestReady) queue(r.queue).oldestReadyAgeMs = Math.max(0, o.now - r.runAt);
  for (const c of controls.queues) Object.assign(queue(c.queue), { paused: c.paused, maxRunning: c.maxRunning, rateLimit: c.rateLimit });
  for (const c of controls.tasks) Object.assign(task(c.task), { maxRunning: c.maxRunning, rateLimit: c.rateLimit });
  const first = o.since - (o.since % o.bucketMs);
  const buckets = new Map<number, ThroughputBucket>();
  for (let start = first; start <= o.now; start += o.bucketMs) buckets.set(start, { start, succeeded: 0, dead: 0, cancelled: 0 });
  for (const f of stored.finished) {
    const b = buckets.get(f.bucket);
    if (b && (f.state === "succeeded" || f.state === "dead" || f.state === "cancelled")) b[f.state] += f.count;
  }
  const byName = <T>(m: Map<string, T>) => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
  return {
    at: o.now,
    queues: byName(queues),
    tasks: byName(tasks),
    running: stored.running.map((j) => ({
      id: j.id,
      task: j.task,
      queue: j.queue,
      attempt: j.attempt,
      concurrencyKey: j.concurrencyKey,
      worker: j.worker,
      leaseExpiresAt: j.leaseExpiresAt ?? o.now,
      leaseExpiresInMs: (j.leaseExpiresAt ?? o.now) - o.now,
    })),
    keys: stored.keys,
    rateLimits: stored.rateLimits.map((r) => {
      const log = readStarts(r.starts);
      const used = startsInWindow(log, o.now, r.periodMs);
      return { scope: r.scope, name: r.name, limit: r.limit, periodMs: r.periodMs, used, waiting: r.ready, nextStartAt: used >= r.limit ? nextRoomAt(log, r.limit, r.periodMs, o.now) : null };
    }),
    throughput: [...buckets.values()],
    windowMs: o.windowMs,
    bucketMs: o.bucketMs,
  };
}

const DAY_MS = 24 * 3600_000;

/** Validates `options`, then reads the snapshot at the clock's now (see Docket.stats). Reads only. */
export async function readStats(adapter: DocketAdapter, clock: Clock, options: StatsOptions): Promise<DocketStats> {
  checkKeys(options, ["windowMs", "bucketMs", "runningLimit", "keysLimit"], "stats(options)");
  const bucketMs = validateInteger(options.bucketMs ?? 60_000, "bucketMs", 1_000, DAY_MS);
  const windowMs = validateInteger(options.windowMs ?? 15 * 60_000, "windowMs", bucketMs, 31 * DAY_MS);
  if (windowMs / bucketMs > 1_000) throw new InvalidArgumentError(`windowMs / bucketMs must be at most 1000 buckets, got ${Math.ceil(windowMs / bucketMs)}`);
  const runningLimit = validateInteger(options.runningLimit ?? 100, "runningLimit", 1, 10_000);
  const keysLimit = validateInteger(options.keysLimit ?? 100, "keysLimit", 1, 10_000);
  const now = clock.now();
  const since = now - windowMs;
  const [stored, controls] = await Promise.all([adapter.stats({ since, bucketMs, runningLimit, keysLimit }), adapter.listControls()]);
  return shapeStats(stored, controls, { now, since, windowMs, bucketMs });
}
