/**
 * Multi-process stress test of concurrency keys and queue caps.
 *
 *   npm run stress -- --adapter sqlite|postgres|mysql [--jobs 2000] [--keys 50]
 *                     [--workers 4] [--concurrency 8] [--poll-ms 10] [--seed N] [--keep]
 *
 * What it does, on a fresh database (a new SQLite file in WAL mode, or a new
 * PostgreSQL / MariaDB database that is dropped at the end):
 *  1. migrates, caps two of three queues (alpha, beta; gamma is uncapped);
 *  2. plans `--jobs` jobs over `--keys` concurrency keys with limits 1–3
 *     (random key, queue and priority per job, ~10 % delayed up to 1.5 s);
 *  3. enqueues a quarter of them, spawns `--workers` OS processes
 *     (scripts/stress-worker.ts, one Docket + one worker each, all queues),
 *     then enqueues the rest in small batches while the workers run, so
 *     admissions race with completions (R1);
 *  4. meanwhile takes a consistent snapshot of the jobs table every ~20 ms
 *     (ONE grouped SELECT, i.e. one read snapshot on every engine) and checks
 *     it: running(queue) <= cap, admitted(key) = ready + running <= limit, and
 *     no blocked job of a key that has a free slot (I2, I3, I4, I10);
 *  5. when every job is finished, stops the workers (stop(), close()) and
 *     checks each process exited 0;
 *  6. analyses the handlers' start/end records (per-process NDJSON files):
 *     sweep-lines per key and per queue give the most jobs ever running at
 *     once, which must be <= limit / cap; every job ran exactly once
 *     (attempt 1), succeeded exactly once, and ends `succeeded` in the
 *     database; nothing was lost, retried, released or reclaimed.
 *
 * Why "<= limit" is a sound assertion on handler intervals: the handler's
 * start stamp is taken after its claim committed and its end stamp before its
 * completion is written, so each measured interval lies strictly inside the
 * interval in which the database counted the job as running (and as holding
 * a key slot). If the recorded intervals of a key overlap L+1 deep, the
 * database held L+1 slots at once. At equal timestamps ends are swept before
 * starts (a job that ended at t and one that started at t did not overlap).
 *
 * Utilisation ("caps fully used while work is waiting") is reported, never
 * asserted: timing on a shared 2-core machine is noisy. The snapshot figure
 * is the share of snapshots in which a capped queue had ready jobs (ready
 * jobs hold their key's slot, so they are claimable) but fewer than `cap`
 * running; the handler figure is the mean number of handlers running /
 * cap over the queue's busy window.
 *
 * Exit code: 0 when no violation was seen, 1 otherwise (2 on bad usage).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { Docket, type EnqueueItem } from "../src/client/docket.ts";
import type { DocketAdapter } from "../src/core/adapter.ts";
import type { StressWorkerConfig } from "./stress-worker.ts";
import { startPrivatePgbouncer } from "../test/support/private-pgbouncer.ts";

type AdapterName = "sqlite" | "postgres" | "mysql";
const ADAPTERS: readonly AdapterName[] = ["sqlite", "postgres", "mysql"];
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const WORKER_SCRIPT = join(ROOT, "scripts", "stress-worker.ts");
const PG_URL = process.env.DOCKET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const MYSQL_URL = process.env.DOCKET_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/mysql";
const PREFIX = "stress_";
const TASK = "stress.job";

/** Queues and their caps; null = uncapped. Every worker serves all of them. */
const QUEUES: { name: string; cap: number | null; weight: number }[] = [
  { name: "alpha", cap: 3, weight: 0.35 },
  { name: "beta", cap: 2, weight: 0.25 },
  { name: "gamma", cap: null, weight: 0.4 },
];

// ---------------------------------------------------------------- arguments

const { values: args } = parseArgs({
  options: {
    adapter: { type: "string" },
    jobs: { type: "string", default: "2000" },
    keys: { type: "string", default: "50" },
    workers: { type: "string", default: "4" },
    concurrency: { type: "string", default: "8" },
    "poll-ms": { type: "string", default: "10" },
    "min-sleep-ms": { type: "string", default: "1" },
    "max-sleep-ms": { type: "string", default: "10" },
    "timeout-s": { type: "string", default: "110" },
    "up-front": { type: "string", default: "25" },
    "batch": { type: "string", default: "40" },
    seed: { type: "string" },
    keep: { type: "boolean", default: false },
    pgbouncer: { type: "boolean", default: false },
  },
  strict: true,
});
function intArg(name: string, min: number): number {
  const v = Number((args as Record<string, unknown>)[name]);
  if (!Number.isSafeInteger(v) || v < min) usage(`--${name} must be an integer >= ${min}`);
  return v;
}
function usage(message: string): never {
  console.error(`stress: ${message}\nusage: npm run stress -- --adapter <${ADAPTERS.join("|")}> [--jobs N] [--keys N] [--workers N] [--concurrency N] [--poll-ms N] [--seed N] [--keep] [--pgbouncer]`);
  process.exit(2);
}
const adapterName = args.adapter as AdapterName;
if (!ADAPTERS.includes(adapterName)) usage(`--adapter must be one of ${ADAPTERS.join(", ")}`);
if (args.pgbouncer && adapterName !== "postgres") usage("--pgbouncer goes with --adapter postgres");
const JOBS = intArg("jobs", 1);
const KEYS = intArg("keys", 1);
const WORKERS = intArg("workers", 1);
const CONCURRENCY = intArg("concurrency", 1);
const POLL_MS = intArg("poll-ms", 1);
const MIN_SLEEP = intArg("min-sleep-ms", 0);
const MAX_SLEEP = Math.max(MIN_SLEEP, intArg("max-sleep-ms", 0));
const TIMEOUT_MS = intArg("timeout-s", 1) * 1000;
/** Percent of the jobs enqueued before the workers start; the rest arrive in batches of 1..BATCH while they run. */
const UP_FRONT = Math.min(100, intArg("up-front", 0));
const BATCH = intArg("batch", 1);
const SEED = args.seed !== undefined ? Number(args.seed) : Math.floor(Math.random() * 2 ** 31);
if (!Number.isSafeInteger(SEED)) usage("--seed must be an integer");

// ---------------------------------------------------------------- plumbing

/** mulberry32: a small seeded PRNG, so a plan can be replayed with --seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const hr = () => performance.timeOrigin + performance.now();

const violations: string[] = [];
function violation(message: string): void {
  if (violations.length < 200) console.error(`VIOLATION: ${message}`);
  violations.push(message);
}

interface SnapshotRow {
  queue: string;
  key: string | null;
  state: string;
  n: number;
}

/** A fresh database for this run, a raw read-only view of it, and how to drop it. */
interface Store {
  /** What a worker process connects to: the sqlite file or the database URL. */
  target: string;
  /** postgres through PgBouncer: the server itself, for LISTEN. */
  listenTarget?: string;
  describe: string;
  adapter(): Promise<DocketAdapter>;
  /** ONE statement, hence one consistent read snapshot on every engine. */
  snapshot(): Promise<SnapshotRow[]>;
  dispose(keep: boolean): Promise<void>;
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

const SNAPSHOT_SQL = `SELECT queue, concurrency_key AS ${"`key`"}, state, COUNT(*) AS n FROM ${PREFIX}jobs GROUP BY queue, concurrency_key, state`;
const runId = `${process.pid.toString(36)}${Date.now().toString(36)}`;

async function openStore(name: AdapterName, dir: string): Promise<Store> {
  if (name === "sqlite") {
    const { sqliteAdapter } = await import("../src/adapters/sqlite/index.ts");
    const { default: Database } = await import("better-sqlite3");
    const filename = join(dir, "stress.db");
    let reader: InstanceType<typeof Database> | null = null;
    return {
      target: filename,
      describe: filename,
      adapter: async () => sqliteAdapter({ filename, tablePrefix: PREFIX, busyTimeoutMs: 30_000 }),
      async snapshot() {
        if (!reader) {
          reader = new Database(filename);
          reader.pragma("busy_timeout = 30000");
        }
        // A WAL reader never blocks writers and sees one committed snapshot per statement.
        return (reader.prepare(SNAPSHOT_SQL.replaceAll("`", '"')).all() as SnapshotRow[]).map(normalize);
      },
      async dispose() {
        reader?.close();
      },
    };
  }
  if (name === "postgres") {
    const { postgresAdapter } = await import("../src/adapters/postgres/index.ts");
    const pg = (await import("pg")).default;
    const database = `docket_stress_${runId}`;
    const root = new pg.Client({ connectionString: PG_URL });
    await root.connect();
    await root.query(`CREATE DATABASE ${database}`);
    await root.end();
    const url = withDatabase(PG_URL, database);
    const reader = new pg.Client({ connectionString: url });
    await reader.connect();
    // With --pgbouncer every docket statement (the workers', the enqueues', the migration) goes through a
    // PgBouncer of this run's own in transaction mode, as docs/databases.md ("PgBouncer") says to run behind one; the snapshots read the server.
    const bouncer = args.pgbouncer ? await startPrivatePgbouncer("the stress test through PgBouncer", 8) : null;
    if (args.pgbouncer && !bouncer) throw new Error("--pgbouncer: no pgbouncer binary (apt-get install pgbouncer)");
    const statements = bouncer ? bouncer.urlFor(url) : url;
    const viaBouncer = bouncer ? { preparedStatements: false, listenConnectionString: url } : {};
    return {
      target: statements,
      ...(bouncer ? { listenTarget: url } : {}),
      describe: `postgres database ${database}${bouncer ? `, through PgBouncer (transaction mode) at ${new URL(statements).host}` : ""}`,
      adapter: async () => postgresAdapter({ connectionString: statements, tablePrefix: PREFIX, max: 4, ...viaBouncer }),
      async snapshot() {
        return ((await reader.query(SNAPSHOT_SQL.replaceAll("`", '"'))).rows as SnapshotRow[]).map(normalize);
      },
      async dispose(keep) {
        await reader.end();
        await bouncer?.destroy();
        if (keep) return;
        const c = new pg.Client({ connectionString: PG_URL });
        await c.connect();
        await c.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
        await c.end();
      },
    };
  }
  const { mysqlAdapter } = await import("../src/adapters/mysql/index.ts");
  const mysql = (await import("mysql2/promise")).default;
  const database = `docket_stress_${runId}`;
  const root = await mysql.createConnection({ uri: MYSQL_URL });
  await root.query(`CREATE DATABASE ${database}`);
  await root.end();
  const url = withDatabase(MYSQL_URL, database);
  const reader = await mysql.createConnection({ uri: url });
  // Each statement of an autocommit session reads its own fresh consistent snapshot at READ COMMITTED.
  await reader.query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
  return {
    target: url,
    describe: `mysql database ${database}`,
    adapter: async () => mysqlAdapter({ uri: url, tablePrefix: PREFIX, connectionLimit: 4 }),
    async snapshot() {
      const [rows] = await reader.query(SNAPSHOT_SQL);
      return (rows as SnapshotRow[]).map(normalize);
    },
    async dispose(keep) {
      await reader.end();
      if (keep) return;
      const c = await mysql.createConnection({ uri: MYSQL_URL });
      await c.query(`DROP DATABASE IF EXISTS ${database}`);
      await c.end();
    },
  };
}

function normalize(r: SnapshotRow): SnapshotRow {
  return { queue: String(r.queue), key: r.key === null ? null : String(r.key), state: String(r.state), n: Number(r.n) };
}

// ---------------------------------------------------------------- the plan

const rand = prng(SEED);
const keyLimits = new Map<string, number>();
for (let i = 0; i < KEYS; i++) keyLimits.set(`k${String(i).padStart(2, "0")}`, 1 + Math.floor(rand() * 3));
const keyNames = [...keyLimits.keys()];
const caps = new Map(QUEUES.filter((q) => q.cap !== null).map((q) => [q.name, q.cap!]));

function pickQueue(): string {
  let x = rand();
  for (const q of QUEUES) {
    if ((x -= q.weight) < 0) return q.name;
  }
  return QUEUES[QUEUES.length - 1]!.name;
}
const plan: EnqueueItem<{ [TASK]: { n: number } }>[] = [];
for (let n = 0; n < JOBS; n++) {
  const key = keyNames[Math.floor(rand() * keyNames.length)]!;
  const delayed = rand() < 0.1;
  plan.push({
    task: TASK,
    payload: { n },
    options: {
      queue: pickQueue(),
      priority: Math.floor(rand() * 3),
      ...(delayed ? { delay: Math.floor(rand() * 1500) } : {}),
      concurrency: { key, limit: keyLimits.get(key)!, onConflict: "block" },
    },
  });
}

// ---------------------------------------------------------------- snapshots

interface SnapshotStats {
  count: number;
  maxRunningByQueue: Map<string, number>;
  maxAdmittedByKey: Map<string, number>;
  /** Snapshots in which the queue had ready jobs, and of those, how many ran below the cap. */
  waiting: Map<string, number>;
  underUsed: Map<string, number>;
  blockedWithRoom: number;
}
const stats: SnapshotStats = {
  count: 0,
  maxRunningByQueue: new Map(),
  maxAdmittedByKey: new Map(),
  waiting: new Map(),
  underUsed: new Map(),
  blockedWithRoom: 0,
};
let lastUnfinished = Number.POSITIVE_INFINITY;
let lastStates: Record<string, number> = {};

function checkSnapshot(rows: SnapshotRow[], label: string): void {
  stats.count++;
  const running = new Map<string, number>();
  const ready = new Map<string, number>();
  const admitted = new Map<string, number>();
  const blocked = new Map<string, number>();
  const states: Record<string, number> = {};
  for (const r of rows) {
    states[r.state] = (states[r.state] ?? 0) + r.n;
    if (r.state === "running") running.set(r.queue, (running.get(r.queue) ?? 0) + r.n);
    if (r.state === "ready") ready.set(r.queue, (ready.get(r.queue) ?? 0) + r.n);
    if (r.key === null) continue;
    if (r.state === "ready" || r.state === "running") admitted.set(r.key, (admitted.get(r.key) ?? 0) + r.n);
    if (r.state === "blocked") blocked.set(r.key, (blocked.get(r.key) ?? 0) + r.n);
  }
  lastStates = states;
  lastUnfinished = (states.scheduled ?? 0) + (states.ready ?? 0) + (states.blocked ?? 0) + (states.running ?? 0);
  for (const q of QUEUES) {
    const run = running.get(q.name) ?? 0;
    stats.maxRunningByQueue.set(q.name, Math.max(stats.maxRunningByQueue.get(q.name) ?? 0, run));
    if (q.cap === null) continue;
    if (run > q.cap) violation(`${label}: queue ${q.name} has ${run} running jobs, cap ${q.cap}`);
    if ((ready.get(q.name) ?? 0) > 0) {
      stats.waiting.set(q.name, (stats.waiting.get(q.name) ?? 0) + 1);
      if (run < q.cap) stats.underUsed.set(q.name, (stats.underUsed.get(q.name) ?? 0) + 1);
    }
  }
  for (const [key, limit] of keyLimits) {
    const a = admitted.get(key) ?? 0;
    const b = blocked.get(key) ?? 0;
    stats.maxAdmittedByKey.set(key, Math.max(stats.maxAdmittedByKey.get(key) ?? 0, a));
    if (a > limit) violation(`${label}: key ${key} has ${a} admitted (ready + running) jobs, limit ${limit}`);
    if (b > 0 && a < limit) {
      stats.blockedWithRoom++;
      violation(`${label}: key ${key} has ${b} blocked job(s) while only ${a} of its ${limit} slots are taken (lost wake-up)`);
    }
  }
}

// ---------------------------------------------------------------- workers

interface Child {
  index: number;
  proc: ChildProcess;
  out: string;
  ready: Promise<void>;
  stopped: Promise<Record<string, unknown> | null>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stopping: boolean;
}

function spawnWorker(index: number, store: Store, dir: string): Child {
  const out = join(dir, `worker-${index}.ndjson`);
  const config: StressWorkerConfig = {
    index,
    adapter: adapterName,
    target: store.target,
    ...(store.listenTarget ? { listenTarget: store.listenTarget } : {}),
    tablePrefix: PREFIX,
    out,
    queues: QUEUES.map((q) => q.name),
    concurrency: CONCURRENCY,
    pollMs: POLL_MS,
    leaseMs: 30_000,
    minSleepMs: MIN_SLEEP,
    maxSleepMs: MAX_SLEEP,
  };
  const proc = spawn(process.execPath, ["--import", "tsx", WORKER_SCRIPT, JSON.stringify(config)], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const child: Child = { index, proc, out, ready: null!, stopped: null!, exited: null!, stopping: false };
  child.exited = new Promise((resolveExit) => proc.on("exit", (code, signal) => resolveExit({ code, signal })));
  child.ready = new Promise((resolveReady, reject) => {
    proc.on("message", (m: { type?: string }) => m?.type === "ready" && resolveReady());
    void child.exited.then(({ code, signal }) => reject(new Error(`worker ${index} exited (code ${code}, signal ${signal}) before it was ready`)));
  });
  child.stopped = new Promise((resolveStopped) => {
    proc.on("message", (m: { type?: string }) => m?.type === "stopped" && resolveStopped(m as Record<string, unknown>));
    void child.exited.then(() => resolveStopped(null));
  });
  void child.exited.then(({ code, signal }) => {
    if (!child.stopping) violation(`worker process ${index} (pid ${proc.pid}) exited on its own: code ${code}, signal ${signal}`);
  });
  return child;
}

// ---------------------------------------------------------------- records

interface Rec {
  k: "start" | "end" | "event" | "call";
  m?: "claim" | "settle";
  ms?: number;
  n?: number;
  type?: string;
  id?: number;
  key?: string | null;
  queue?: string;
  attempt?: number;
  state?: string;
  pid: number;
  t: number;
  error?: string;
  reason?: string;
}

/** The largest number of intervals open at once; ends sort before starts at equal times. */
function maxOverlap(intervals: { s: number; e: number }[]): number {
  const points: [number, number][] = [];
  for (const { s, e } of intervals) points.push([s, 1], [e, -1]);
  points.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let max = 0;
  for (const [, d] of points) {
    open += d;
    if (open > max) max = open;
  }
  return max;
}

/** Time-weighted mean of open intervals over [from, to], and the share of that time with at least `full` open. */
function occupancy(intervals: { s: number; e: number }[], full: number): { mean: number; fullShare: number; window: number } {
  if (intervals.length === 0) return { mean: 0, fullShare: 0, window: 0 };
  const points: [number, number][] = [];
  for (const { s, e } of intervals) points.push([s, 1], [e, -1]);
  points.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const from = points[0]![0];
  const to = points[points.length - 1]![0];
  let open = 0;
  let area = 0;
  let fullTime = 0;
  let prev = from;
  for (const [t, d] of points) {
    area += open * (t - prev);
    if (open >= full) fullTime += t - prev;
    prev = t;
    open += d;
  }
  const window = to - from;
  return { mean: window > 0 ? area / window : 0, fullShare: window > 0 ? fullTime / window : 0, window };
}

// ---------------------------------------------------------------- main

const dir = mkdtempSync(join(tmpdir(), `docket-stress-${adapterName}-`));
const t0 = hr();
console.log(
  `stress: adapter=${adapterName} jobs=${JOBS} keys=${KEYS} (limits 1-3) workers=${WORKERS}x${CONCURRENCY} pollMs=${POLL_MS} ` +
    `sleep=${MIN_SLEEP}-${MAX_SLEEP}ms caps=${[...caps].map(([q, c]) => `${q}:${c}`).join(",")} seed=${SEED}`,
);
const store = await openStore(adapterName, dir);
const docket = new Docket({ adapter: await store.adapter() });
const children: Child[] = [];
let enqueuedIds: number[] = [];
let timings = { enqueueDone: 0, drained: 0, stopped: 0 };

try {
  await docket.migrate();
  for (const [queue, cap] of caps) await docket.setQueueCap(queue, cap);

  // A quarter up front (blocked lists build up), then the rest while workers run.
  const upFront = Math.ceil((JOBS * UP_FRONT) / 100);
  for (let i = 0; i < upFront; i += 100) {
    enqueuedIds.push(...(await docket.enqueueMany(plan.slice(i, Math.min(i + 100, upFront)))).map((j) => j.id));
  }

  let snapshotting = true;
  const snapshotLoop = (async () => {
    while (snapshotting) {
      try {
        checkSnapshot(await store.snapshot(), `snapshot ${stats.count + 1} at +${((hr() - t0) / 1000).toFixed(2)}s`);
      } catch (error) {
        violation(`snapshot failed: ${String(error)}`);
        return;
      }
      await sleep(20);
    }
  })();

  for (let i = 0; i < WORKERS; i++) children.push(spawnWorker(i, store, dir));
  await Promise.all(children.map((c) => c.ready));
  const tReady = hr();
  console.log(`stress: ${WORKERS} worker processes ready after ${((tReady - t0) / 1000).toFixed(1)}s; ${enqueuedIds.length} jobs enqueued up front`);

  // The rest: batches of 1..BATCH jobs, one transaction each, with short pauses.
  for (let i = upFront; i < JOBS; ) {
    const size = 1 + Math.floor(rand() * BATCH);
    const batch = plan.slice(i, Math.min(i + size, JOBS));
    i += batch.length;
    if (batch.length === 1) enqueuedIds.push((await docket.enqueue(batch[0]!.task, batch[0]!.payload, batch[0]!.options)).id);
    else enqueuedIds.push(...(await docket.enqueueMany(batch)).map((j) => j.id));
    await sleep(Math.floor(rand() * 15));
  }
  timings.enqueueDone = hr();

  // Drain: wait until the snapshots see nothing unfinished (or give up).
  const deadline = t0 + TIMEOUT_MS;
  for (;;) {
    const rows = await store.snapshot();
    checkSnapshot(rows, `drain check at +${((hr() - t0) / 1000).toFixed(2)}s`);
    if (lastUnfinished === 0) break;
    if (hr() > deadline) {
      violation(`not drained after ${TIMEOUT_MS / 1000}s: ${JSON.stringify(lastStates)}`);
      break;
    }
    if (children.some((c) => c.proc.exitCode !== null || c.proc.signalCode !== null)) {
      violation(`a worker process died; ${lastUnfinished} jobs unfinished: ${JSON.stringify(lastStates)}`);
      break;
    }
    await sleep(50);
  }
  timings.drained = hr();
  snapshotting = false;
  await snapshotLoop;
  checkSnapshot(await store.snapshot(), "final snapshot");

  // Graceful stop of every worker: stop(), close(), then the process must exit 0 on its own.
  for (const c of children) {
    c.stopping = true;
    if (c.proc.connected) c.proc.send({ type: "stop" });
  }
  const stopReports = await Promise.all(
    children.map(async (c) => {
      const timer = setTimeout(() => {
        violation(`worker process ${c.index} (pid ${c.proc.pid}) did not exit within 20s of stop; killing it`);
        c.proc.kill("SIGKILL");
      }, 20_000);
      const [report, exit] = await Promise.all([c.stopped, c.exited]);
      clearTimeout(timer);
      if (exit.code !== 0) violation(`worker process ${c.index} (pid ${c.proc.pid}) exited with code ${exit.code}, signal ${exit.signal}`);
      if (!report) violation(`worker process ${c.index} sent no stop report`);
      else if (Number(report.inFlight) !== 0) violation(`worker process ${c.index} still had ${report.inFlight} jobs in flight after stop()`);
      return report;
    }),
  );
  timings.stopped = hr();

  // ------------------------------------------------------------ analysis
  const recs: Rec[] = [];
  for (const c of children) {
    if (!existsSync(c.out)) continue;
    for (const line of readFileSync(c.out, "utf8").split("\n")) if (line) recs.push(JSON.parse(line) as Rec);
  }
  const starts = new Map<number, Rec[]>();
  const ends = new Map<number, Rec[]>();
  const succeededEvents = new Map<number, number>();
  const otherEvents = new Map<string, number>();
  const errors: Rec[] = [];
  const lostEvents: Rec[] = [];
  const callMs = { claim: [] as number[], settle: [] as number[] };
  for (const r of recs) {
    if (r.k === "call") callMs[r.m!].push(r.ms!);
    else if (r.k === "start") starts.set(r.id!, [...(starts.get(r.id!) ?? []), r]);
    else if (r.k === "end") ends.set(r.id!, [...(ends.get(r.id!) ?? []), r]);
    else if (r.type === "succeeded") succeededEvents.set(r.id!, (succeededEvents.get(r.id!) ?? 0) + 1);
    else if (r.type === "error") errors.push(r);
    else {
      if (r.type === "lost") lostEvents.push(r);
      otherEvents.set(r.type!, (otherEvents.get(r.type!) ?? 0) + 1);
    }
  }

  // Every job ran once, at attempt 1, succeeded once, and is succeeded in the database.
  const enqueued = new Set(enqueuedIds);
  if (enqueued.size !== JOBS) violation(`enqueued ${enqueued.size} distinct ids for ${JOBS} planned jobs`);
  const finalRows: { id: number; state: string; attempt: number }[] = [];
  for (let afterId = 0; ; ) {
    const page = await docket.list({ afterId, limit: 1000 });
    if (page.length === 0) break;
    finalRows.push(...page.map((j) => ({ id: j.id, state: j.state, attempt: j.attempt })));
    afterId = page[page.length - 1]!.id;
  }
  const finalById = new Map(finalRows.map((r) => [r.id, r]));
  let doubleRuns = 0;
  let neverRan = 0;
  let notSucceeded = 0;
  for (const id of enqueued) {
    const s = starts.get(id) ?? [];
    if (s.length === 0) {
      neverRan++;
      violation(`job ${id} never ran (final state ${finalById.get(id)?.state ?? "missing"})`);
    } else if (s.length > 1) {
      doubleRuns++;
      violation(`job ${id} (key ${s[0]!.key}) ran ${s.length} times: ${s.map((r) => `pid ${r.pid} attempt ${r.attempt} at ${r.t.toFixed(3)}`).join("; ")}`);
    } else if (s[0]!.attempt !== 1) violation(`job ${id} ran at attempt ${s[0]!.attempt}, expected 1`);
    if ((ends.get(id) ?? []).length !== s.length) violation(`job ${id}: ${s.length} handler starts but ${(ends.get(id) ?? []).length} ends`);
    const ok = succeededEvents.get(id) ?? 0;
    if (ok !== 1) violation(`job ${id}: ${ok} "succeeded" events, expected exactly 1`);
    const f = finalById.get(id);
    if (!f || f.state !== "succeeded") {
      notSucceeded++;
      violation(`job ${id} ends in state ${f?.state ?? "missing"}, expected succeeded`);
    }
  }
  for (const id of starts.keys()) if (!enqueued.has(id)) violation(`a handler ran job ${id}, which this run never enqueued`);
  if (finalRows.length !== JOBS) violation(`the database holds ${finalRows.length} jobs, ${JOBS} were enqueued`);
  // A "lost" event for a job whose completion this same worker won (its "succeeded" event fired) is a
  // spurious event: the heartbeat sweep raced the completion. Reported apart from a genuine loss.
  const succeededAt = new Map<number, Rec>();
  for (const r of recs) if (r.k === "event" && r.type === "succeeded") succeededAt.set(r.id!, r);
  const spurious = lostEvents.filter((l) => succeededAt.get(l.id!)?.pid === l.pid);
  for (const l of spurious.slice(0, 10)) {
    const ok = succeededAt.get(l.id!)!;
    violation(
      `job ${l.id} (key ${l.key}, pid ${l.pid}): "lost" event (${l.reason}) ${(l.t - ok.t).toFixed(1)} ms after this worker's own ` +
        `"succeeded" event for the same attempt: the worker's heartbeat raced its completion (a spurious event, I6)`,
    );
  }
  if (spurious.length > 10) violation(`${spurious.length - 10} more spurious "lost" events`);
  for (const [type, n] of otherEvents) {
    const genuine = type === "lost" ? n - spurious.length : n;
    if (genuine > 0) violation(`${genuine} worker "${type}" event(s): none expected in a run without failures`);
  }
  for (const e of errors.slice(0, 5)) console.error(`worker error (pid ${e.pid}): ${e.error?.split("\n")[0]}`);
  if (errors.length > 0) violation(`${errors.length} worker "error" event(s) (first ones printed above)`);

  // Sweep-lines over handler intervals: per key (<= limit), per queue (<= cap), per process (<= concurrency).
  const intervals: { id: number; key: string; queue: string; pid: number; s: number; e: number }[] = [];
  for (const [id, s] of starts) {
    const e = ends.get(id) ?? [];
    for (const st of s) {
      const end = e.find((x) => x.pid === st.pid && x.attempt === st.attempt);
      if (end) intervals.push({ id, key: st.key!, queue: st.queue!, pid: st.pid, s: st.t, e: end.t });
    }
  }
  const group = <K extends "key" | "queue" | "pid">(field: K) => {
    const m = new Map<string | number, { s: number; e: number }[]>();
    for (const iv of intervals) m.set(iv[field], [...(m.get(iv[field]) ?? []), iv]);
    return m;
  };
  const byKey = group("key");
  const byQueue = group("queue");
  const byPid = group("pid");
  const keyMax = new Map<string, number>();
  for (const [key, list] of byKey) {
    const max = maxOverlap(list);
    keyMax.set(String(key), max);
    const limit = keyLimits.get(String(key));
    if (limit === undefined) violation(`handler intervals for unknown key ${key}`);
    else if (max > limit) {
      const sorted = [...list].sort((a, b) => a.s - b.s);
      violation(`key ${key}: ${max} handlers ran at once, limit ${limit}; intervals ${JSON.stringify(sorted.slice(0, 6))}`);
    }
  }
  const queueMax = new Map<string, number>();
  for (const [queue, list] of byQueue) {
    const max = maxOverlap(list);
    queueMax.set(String(queue), max);
    const cap = caps.get(String(queue));
    if (cap !== undefined && max > cap) violation(`queue ${queue}: ${max} handlers ran at once, cap ${cap}`);
  }
  let pidMax = 0;
  for (const [pid, list] of byPid) {
    const max = maxOverlap(list);
    pidMax = Math.max(pidMax, max);
    if (max > CONCURRENCY) violation(`process ${pid}: ${max} handlers at once, worker concurrency ${CONCURRENCY}`);
  }
  const globalMax = maxOverlap(intervals);
  // Smallest gap between one job of a key ending and the next starting (a limit-1 handoff), for information.
  let minHandoff = Number.POSITIVE_INFINITY;
  for (const [key, list] of byKey) {
    if (keyLimits.get(String(key)) !== 1) continue;
    const sorted = [...list].sort((a, b) => a.s - b.s);
    for (let i = 1; i < sorted.length; i++) minHandoff = Math.min(minHandoff, sorted[i]!.s - sorted[i - 1]!.e);
  }

  // ------------------------------------------------------------ figures
  const seconds = (a: number, b: number) => `${((b - a) / 1000).toFixed(1)}s`;
  const runs = [...starts.values()].reduce((n, s) => n + s.length, 0);
  const rows: [string, string][] = [
    ["adapter", `${adapterName} (${store.describe})`],
    ["seed", String(SEED)],
    ["jobs enqueued / in database", `${enqueued.size} / ${finalRows.length}`],
    ["handler runs", `${runs} (jobs run: ${starts.size}, run twice: ${doubleRuns}, never ran: ${neverRan})`],
    ["succeeded in database", `${finalRows.filter((r) => r.state === "succeeded").length} (not succeeded: ${notSucceeded})`],
    ["worker processes", `${children.length}, pids ${children.map((c) => c.proc.pid).join(" ")}, all exited 0: ${stopReports.every((r) => r !== null) && children.every((c) => c.proc.exitCode === 0) ? "yes" : "NO"}`],
    ["max handlers at once", `all: ${globalMax}; per process: ${pidMax} (concurrency ${CONCURRENCY})`],
  ];
  for (const limit of [1, 2, 3]) {
    const keys = keyNames.filter((k) => keyLimits.get(k) === limit);
    if (keys.length === 0) continue;
    const observed = keys.map((k) => keyMax.get(k) ?? 0);
    const dbObserved = keys.map((k) => stats.maxAdmittedByKey.get(k) ?? 0);
    rows.push([
      `keys with limit ${limit}`,
      `${keys.length} keys; max running handlers per key ${Math.max(...observed)} (limit ${limit}); ${observed.filter((o) => o === limit).length} keys reached it; db max admitted ${Math.max(...dbObserved)}`,
    ]);
  }
  if (Number.isFinite(minHandoff)) rows.push(["smallest limit-1 handoff gap", `${minHandoff.toFixed(3)} ms (handler end -> next start of the same key)`]);
  for (const q of QUEUES) {
    const list = byQueue.get(q.name) ?? [];
    const occ = occupancy(list, q.cap ?? Number.POSITIVE_INFINITY);
    const dbMax = stats.maxRunningByQueue.get(q.name) ?? 0;
    if (q.cap === null) {
      rows.push([`queue ${q.name} (uncapped)`, `${list.length} runs; max handlers at once ${queueMax.get(q.name) ?? 0}; db max running ${dbMax}; mean ${occ.mean.toFixed(2)} over ${seconds(0, occ.window)}`]);
      continue;
    }
    const waiting = stats.waiting.get(q.name) ?? 0;
    const under = stats.underUsed.get(q.name) ?? 0;
    rows.push([`queue ${q.name} (cap ${q.cap})`, `${list.length} runs; max handlers at once ${queueMax.get(q.name) ?? 0}; db max running ${dbMax}`]);
    rows.push([
      `  utilisation ${q.name}`,
      `handlers: mean ${(occ.mean / q.cap * 100).toFixed(1)}% of cap, at cap ${(occ.fullShare * 100).toFixed(1)}% of ${seconds(0, occ.window)}; ` +
        `db: below cap in ${under} of ${waiting} snapshots with ready jobs (${waiting ? ((under / waiting) * 100).toFixed(1) : "0.0"}%)`,
    ]);
  }
  const pct = (a: number[], p: number) => {
    if (a.length === 0) return "-";
    const sorted = [...a].sort((x, y) => x - y);
    return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!.toFixed(1);
  };
  rows.push([
    "adapter call latency (ms)",
    `claim p50 ${pct(callMs.claim, 0.5)} p99 ${pct(callMs.claim, 0.99)} (${callMs.claim.length} calls); ` +
      `settle p50 ${pct(callMs.settle, 0.5)} p99 ${pct(callMs.settle, 0.99)} (${callMs.settle.length} calls)`,
  ]);
  rows.push(["snapshots (consistent reads)", `${stats.count}; blocked-with-room findings: ${stats.blockedWithRoom}`]);
  rows.push(["worker events", `errors ${errors.length}; spurious lost ${spurious.length}; ${[...otherEvents].map(([t, n]) => `${t} ${n}`).join(", ") || "no retry/dead/lost/released"}`]);
  rows.push(["time", `total ${seconds(t0, timings.stopped)}; enqueue done +${seconds(t0, timings.enqueueDone)}; drained +${seconds(t0, timings.drained)}; stop ${seconds(timings.drained, timings.stopped)}`]);
  rows.push(["violations", String(violations.length)]);
  const width = Math.max(...rows.map(([k]) => k.length));
  console.log(`\n${"-".repeat(width + 60)}`);
  for (const [k, v] of rows) console.log(`${k.padEnd(width)}  ${v}`);
  console.log("-".repeat(width + 60));
} catch (error) {
  violation(`stress run aborted: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
} finally {
  for (const c of children) if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill("SIGKILL");
  await docket.close().catch(() => undefined);
  const keep = args.keep || violations.length > 0;
  await store.dispose(args.keep).catch((e) => console.error(`stress: cleanup failed: ${String(e)}`));
  if (keep) console.log(`stress: records kept in ${dir}${args.keep ? ` (database kept: ${store.describe})` : ""}`);
  else rmSync(dir, { recursive: true, force: true });
}

if (violations.length > 0) {
  console.error(`stress: FAILED on ${adapterName} with ${violations.length} violation(s); reproduce the plan with --seed ${SEED}`);
  process.exit(1);
}
console.log(`stress: OK on ${adapterName}`);
process.exit(0);
