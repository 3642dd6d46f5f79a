/**
 * One worker process of the multi-process stress test (`scripts/stress.ts`
 * spawns four of these). It opens its own Docket on the shared database,
 * runs one worker over every stress queue, and appends one NDJSON line per
 * handler start, handler end and worker event to its own file:
 *
 *   {"k":"start","id":12,"key":"k07","queue":"alpha","attempt":1,"pid":4711,"t":1732240000123.456,"d":1732240000123}
 *
 * `t` is `performance.timeOrigin + performance.now()` (sub-millisecond, and
 * comparable across processes on one machine), `d` is `Date.now()`.
 * The start stamp is taken after the claim committed (the handler runs only
 * then) and the end stamp before the completion is written, so every
 * recorded [start, end] lies strictly inside the interval in which the
 * database counted the job as running.
 *
 * Protocol with the parent over the IPC channel: the child sends
 * `{ type: "ready" }` once its worker is started; the parent sends
 * `{ type: "stop" }`; the child stops the worker (graceful), closes the
 * docket, sends `{ type: "stopped", … }` and exits 0 when its event loop is
 * empty. Any failure to start or stop exits non-zero.
 *
 * Usage (normally only from stress.ts):
 *   node --import tsx scripts/stress-worker.ts '<json config>'
 */
import { appendFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { Docket } from "../src/client/docket.ts";
import type { DocketAdapter } from "../src/core/adapter.ts";
import type { WorkerEvent } from "../src/worker/index.ts";

export interface StressWorkerConfig {
  index: number;
  adapter: "sqlite" | "postgres" | "mysql";
  /** sqlite: the file; postgres/mysql: the URL of the stress database. */
  target: string;
  /** postgres through a pooler: the server itself, for LISTEN (statements go to `target`, unnamed). */
  listenTarget?: string;
  tablePrefix: string;
  out: string;
  queues: string[];
  concurrency: number;
  pollMs: number;
  leaseMs: number;
  /** Handler sleep, uniformly random in [minSleepMs, maxSleepMs]. */
  minSleepMs: number;
  maxSleepMs: number;
}

export interface StressPayload {
  n: number;
}

const config = JSON.parse(process.argv[2] ?? "null") as StressWorkerConfig | null;
if (!config || typeof process.send !== "function") {
  console.error("stress-worker: run me from scripts/stress.ts (needs a JSON config argument and an IPC channel)");
  process.exit(2);
}
const send = (message: unknown) => process.send!(message);
const now = () => performance.timeOrigin + performance.now();

function record(line: Record<string, unknown>): void {
  // Synchronous append: a line is on disk before the handler returns, so a crash loses nothing recorded.
  appendFileSync(config!.out, JSON.stringify(line) + "\n");
}

async function openAdapter(c: StressWorkerConfig): Promise<DocketAdapter> {
  switch (c.adapter) {
    case "sqlite": {
      const { sqliteAdapter } = await import("../src/adapters/sqlite/index.ts");
      return sqliteAdapter({ filename: c.target, tablePrefix: c.tablePrefix, busyTimeoutMs: 30_000 });
    }
    case "postgres": {
      const { postgresAdapter } = await import("../src/adapters/postgres/index.ts");
      const pooled = c.listenTarget ? { listenConnectionString: c.listenTarget, preparedStatements: false } : {};
      return postgresAdapter({ connectionString: c.target, tablePrefix: c.tablePrefix, max: 6, ...pooled });
    }
    case "mysql": {
      const { mysqlAdapter } = await import("../src/adapters/mysql/index.ts");
      return mysqlAdapter({ uri: c.target, tablePrefix: c.tablePrefix, connectionLimit: 6 });
    }
  }
}

const counts: Record<string, number> = {};
const pid = process.pid;
const docket = new Docket({ adapter: await openAdapter(config) });
// Timing only: how long each claim and outcome write (settle) took in this process (a figure in the report).
{
  // An outcome write that hands slots off (settleAndHandOff) counts as a settle.
  const a = docket.adapter as unknown as Record<"claim" | "settle" | "settleAndHandOff", ((...x: unknown[]) => Promise<unknown>) | undefined>;
  for (const method of ["claim", "settle", "settleAndHandOff"] as const) {
    const m = method === "claim" ? "claim" : "settle";
    const call = a[method]?.bind(docket.adapter);
    if (call === undefined) continue;
    a[method] = async (...x: unknown[]) => {
      const s = now();
      const r = await call(...x);
      const n = Array.isArray(r) ? r.length : r && typeof r === "object" && "settled" in r ? (r.settled as unknown[]).length : r ? 1 : 0;
      record({ k: "call", m, pid, ms: now() - s, n, t: s });
      return r;
    };
  }
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const worker = docket.worker({
  queues: config.queues,
  concurrency: config.concurrency,
  pollMs: config.pollMs,
  leaseMs: config.leaseMs,
  handlers: {
    "stress.job": async (_payload, ctx) => {
      const { id, concurrencyKey: key, queue, attempt } = ctx.job;
      record({ k: "start", id, key, queue, attempt, pid, t: now(), d: Date.now() });
      const span = config.maxSleepMs - config.minSleepMs;
      await sleep(config.minSleepMs + Math.floor(Math.random() * (span + 1)));
      record({ k: "end", id, key, queue, attempt, pid, t: now(), d: Date.now() });
    },
  },
  onEvent: (event: WorkerEvent) => {
    counts[event.type] = (counts[event.type] ?? 0) + 1;
    if (event.type === "error") {
      record({ k: "event", type: "error", pid, t: now(), error: String(event.error?.stack ?? event.error) });
      return;
    }
    // "started" mirrors the handler's start line; every other event is recorded with the time it fired
    // (for "succeeded": right after the completion committed).
    if (event.type === "started") return;
    if (event.type === "keyRepaired") {
      // Counted as an unexpected event by the parent: docket's own writes never strand a key.
      record({ k: "event", type: "keyRepaired", key: event.key, pid, t: now() });
      return;
    }
    const j = event.job;
    const extra = "error" in event ? { error: event.error } : "reason" in event ? { reason: event.reason } : {};
    record({ k: "event", type: event.type, id: j.id, key: j.concurrencyKey, queue: j.queue, attempt: j.attempt, state: j.state, pid, t: now(), ...extra });
  },
});

process.on("message", (message: { type?: string }) => {
  if (message?.type !== "stop") return;
  void (async () => {
    try {
      const t0 = now();
      await worker.stop({ timeoutMs: 10_000 });
      const inFlight = worker.inFlight;
      await docket.close();
      send({ type: "stopped", index: config.index, pid, counts, inFlight, stopMs: now() - t0 });
      process.disconnect();
    } catch (error) {
      console.error(`stress-worker ${config.index}: stop failed`, error);
      process.exit(1);
    }
  })();
});
process.on("disconnect", () => {
  // The parent went away without asking us to stop: stop anyway, then leave.
  void worker.stop({ timeoutMs: 2_000 }).finally(() => docket.close());
});

await worker.start();
send({ type: "ready", index: config.index, pid });
