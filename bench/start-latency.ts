/**
 * Benchmark (not a test): how long a job waits between its enqueue and its
 * handler's start when the worker is idle, on each adapter, with the default
 * pollMs (1 s).
 *
 *   npx tsx bench/start-latency.ts [--adapter sqlite|postgres|mysql] [--jobs 30] [--peer]
 *
 * With --peer (needs `npm --prefix bench ci`), graphile-worker with its
 * defaults is measured the same way on the same PostgreSQL, jobs added
 * through its own utils (another pool, as another process would).
 *
 * Two ways to enqueue, each on a fresh store with one idle worker:
 *  - same docket:  through the worker's own Docket (same process): an enqueue
 *                  wakes the worker at once;
 *  - other docket: through another Docket on its own connection, as another
 *                  process would: on PostgreSQL LISTEN/NOTIFY wakes the
 *                  worker; elsewhere it finds the job at its next poll.
 * Jobs are enqueued one at a time, each after the previous one started and a
 * random pause (0–100 ms), so the worker is asleep when the job arrives.
 */
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { Docket } from "../src/client/docket.ts";
import { ADAPTERS, PG_URL, openDatabase, pgAdmin, withDatabase, type AdapterName } from "./databases.ts";

const { values: args } = parseArgs({
  options: { adapter: { type: "string" }, jobs: { type: "string", default: "30" }, peer: { type: "boolean", default: false } },
  strict: true,
});
const JOBS = Number(args.jobs);
const selected: AdapterName[] = args.adapter ? [args.adapter as AdapterName] : [...ADAPTERS];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;

console.log(`start latency, idle worker, pollMs 1000 (default), ${JOBS} jobs; ms`);
console.log(`${"adapter".padEnd(9)}${"enqueued through".padEnd(18)}${"p50".padStart(9)}${"p99".padStart(9)}`);
for (const name of selected) {
  const db = await openDatabase(name);
  try {
    for (const [i, mode] of (["same docket", "other docket"] as const).entries()) {
      const adapter = await db.open(i);
      const producerAdapter = mode === "same docket" ? adapter : await db.open(i);
      const docket = new Docket({ adapter });
      await docket.migrate();
      const producer = mode === "same docket" ? docket : new Docket({ adapter: producerAdapter });
      const enqueuedAt = new Map<number, number>();
      const latencies: number[] = [];
      let started!: () => void;
      const worker = docket.worker({
        logger: null,
        handlers: {
          "bench.job": (n) => {
            latencies.push(performance.now() - enqueuedAt.get(n as number)!);
            started();
          },
        },
      });
      await worker.start();
      await sleep(50);
      for (let n = 0; n < JOBS; n++) {
        await sleep(Math.random() * 100);
        const done = new Promise<void>((r) => (started = r));
        enqueuedAt.set(n, performance.now());
        await producer.enqueue("bench.job", n);
        await done;
      }
      await worker.stop();
      await adapter.close();
      if (producerAdapter !== adapter) await producerAdapter.close();
      console.log(`${name.padEnd(9)}${mode.padEnd(18)}${quantile(latencies, 0.5).toFixed(2).padStart(9)}${quantile(latencies, 0.99).toFixed(2).padStart(9)}`);
    }
  } finally {
    await db.dispose();
  }
}

if (args.peer) {
  const load = (m: string): Promise<any> => import(m);
  const { run, makeWorkerUtils, Logger } = await load("graphile-worker");
  const database = `docket_latency_peer_${process.pid}`;
  const admin = pgAdmin;
  await admin(`CREATE DATABASE ${database}`);
  try {
    const url = withDatabase(PG_URL, database);
    const utils = await makeWorkerUtils({ connectionString: url });
    await utils.migrate();
    const enqueuedAt = new Map<number, number>();
    const latencies: number[] = [];
    let started!: () => void;
    const runner = await run({
      connectionString: url,
      noHandleSignals: true,
      logger: new Logger(() => () => undefined),
      taskList: {
        "bench.job": async (p: { n: number }) => {
          latencies.push(performance.now() - enqueuedAt.get(p.n)!);
          started();
        },
      },
    });
    await sleep(200);
    for (let n = 0; n < JOBS; n++) {
      await sleep(Math.random() * 100);
      const done = new Promise<void>((r) => (started = r));
      enqueuedAt.set(n, performance.now());
      await utils.addJob("bench.job", { n });
      await done;
    }
    await runner.stop();
    await utils.release();
    console.log(`${"graphile".padEnd(9)}${"its own utils".padEnd(18)}${quantile(latencies, 0.5).toFixed(2).padStart(9)}${quantile(latencies, 0.99).toFixed(2).padStart(9)}`);
  } finally {
    await admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  }
}
