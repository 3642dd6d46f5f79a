/**
 * What a Galera cluster costs docket: N no-op jobs enqueued (enqueueMany,
 * batches of 500) and drained by 3 workers of concurrency 10 in this
 * process, with each control (none; keysKxL: K concurrency keys of limit L;
 * capN: a queue cap of N), on three setups:
 *  - one:     one MariaDB server of this script's (private-mariadb.ts);
 *  - galera1: a 3-node Galera cluster (private-galera.ts), every worker and
 *             the producer on node 1;
 *  - galera3: the same cluster, one worker per node, the producer on node 1.
 * Both servers use unsynced storage (innodb_flush_log_at_trx_commit=2); the
 * Galera nodes have a 32 MB buffer pool, the single server the default.
 * Prints each run, then per setup and control the median jobs/s (drain and
 * enqueue) and the ratio to "one" with the same control, taken within each
 * run (runs alternate setups).
 *
 *   npx tsx bench/galera.ts [--jobs 2000] [--runs 3] [--controls none,keys50x1,cap10]
 */
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { mysqlAdapter } from "../src/adapters/mysql/index.ts";
import { Docket, type EnqueueItem } from "../src/index.ts";
import { startPrivateGalera, type GaleraNode } from "../test/support/private-galera.ts";
import { startPrivateMariadb } from "../test/support/private-mariadb.ts";

const { values: args } = parseArgs({
  options: { jobs: { type: "string", default: "2000" }, runs: { type: "string", default: "3" }, controls: { type: "string", default: "none,keys50x1,cap10" } },
  strict: true,
});
const JOBS = Number(args.jobs);
const RUNS = Number(args.runs);
const CONTROLS = args.controls!.split(",");
const WORKERS = 3;
const CONCURRENCY = 10;
const DEADLINE_MS = 300_000;

type Tasks = { noop: { i: number } };
type Setup = "one" | "galera1" | "galera3";
const mysql = (await import("mysql2/promise")).default;

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

const single = await startPrivateMariadb();
const cluster = await startPrivateGalera("bench/galera.ts");
if (cluster === null) throw new Error("bench/galera.ts needs MariaDB with Galera (Debian's galera-4 and rsync)");
const DATABASE = "docket_bench_galera";
for (const url of [single.url, cluster.url(1)]) {
  const c = await mysql.createConnection({ uri: url });
  await c.query(`CREATE DATABASE ${DATABASE}`);
  await c.end();
}
// DDL replicates in total order: wait until every node has the database.
for (const node of [2, 3] as const) {
  for (;;) {
    const c = await mysql.createConnection({ uri: cluster.url(node) });
    const [rows] = await c.query(`SHOW DATABASES LIKE '${DATABASE}'`);
    await c.end();
    if ((rows as unknown[]).length === 1) break;
    await new Promise((r) => setTimeout(r, 100));
  }
}
const urlOf = (setup: Setup, worker: number): string =>
  setup === "one" ? withDatabase(single.url, DATABASE) : withDatabase(cluster.url(setup === "galera3" ? (((worker % 3) + 1) as GaleraNode) : 1), DATABASE);

let stores = 0;
/** One run: a fresh store (its own table prefix), the jobs enqueued, then drained; jobs/s of both. */
async function run(setup: Setup, control: string): Promise<{ drain: number; enqueue: number }> {
  const tablePrefix = `b${(stores++).toString(36)}_`;
  const dockets = Array.from({ length: WORKERS }, (_, w) => new Docket<Tasks>({ adapter: mysqlAdapter({ uri: urlOf(setup, w), tablePrefix, connectionLimit: 6 }) }));
  try {
    const producer = dockets[0]!;
    await producer.migrate();
    const keys = /^keys(\d+)x(\d+)$/.exec(control);
    const cap = /^cap(\d+)$/.exec(control);
    if (cap) await producer.setQueueCap("q", Number(cap[1]));
    const items: EnqueueItem<Tasks>[] = Array.from({ length: JOBS }, (_, i) => ({
      task: "noop",
      payload: { i },
      options: { queue: "q", ...(keys ? { concurrency: { key: `k${i % Number(keys[1])}`, limit: Number(keys[2]) } } : {}) },
    }));
    const e0 = performance.now();
    for (let i = 0; i < items.length; i += 500) await producer.enqueueMany(items.slice(i, i + 500));
    const enqueueMs = performance.now() - e0;
    let done = 0;
    let finished: () => void = () => undefined;
    const all = new Promise<void>((resolve) => (finished = resolve));
    const workers = dockets.map((d, w) =>
      d.worker({
        name: `w${w}`,
        queues: ["q"],
        concurrency: CONCURRENCY,
        pollMs: 50,
        logger: null,
        handlers: { noop: async () => undefined },
        onEvent: (e) => {
          if (e.type === "succeeded" && ++done === JOBS) finished();
        },
      }),
    );
    const t0 = performance.now();
    for (const w of workers) await w.start();
    await Promise.race([all, new Promise((r) => setTimeout(r, DEADLINE_MS))]);
    const ms = performance.now() - t0;
    await Promise.all(workers.map((w) => w.stop()));
    return { drain: (done / ms) * 1000, enqueue: (JOBS / enqueueMs) * 1000 };
  } finally {
    for (const d of dockets) await d.close().catch(() => undefined);
  }
}

const SETUPS: Setup[] = ["one", "galera1", "galera3"];
const results = new Map<string, { drain: number; enqueue: number }[]>();
try {
  for (let r = 1; r <= RUNS; r++) {
    for (const control of CONTROLS) {
      for (const setup of SETUPS) {
        const x = await run(setup, control);
        const key = `${setup} ${control}`;
        results.set(key, [...(results.get(key) ?? []), x]);
        console.log(`run ${r} ${setup.padEnd(7)} ${control.padEnd(9)} drain ${x.drain.toFixed(0).padStart(5)} jobs/s, enqueue ${x.enqueue.toFixed(0).padStart(5)} jobs/s`);
      }
    }
  }
} finally {
  await cluster.destroy();
  await single.destroy();
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`\n| setup | control | drain jobs/s | drain ratio to one | enqueue jobs/s | enqueue ratio to one |`);
console.log(`|---|---|---|---|---|---|`);
for (const control of CONTROLS) {
  const base = results.get(`one ${control}`)!;
  for (const setup of SETUPS) {
    const xs = results.get(`${setup} ${control}`)!;
    const drainRatio = median(xs.map((x, i) => x.drain / base[i]!.drain));
    const enqueueRatio = median(xs.map((x, i) => x.enqueue / base[i]!.enqueue));
    console.log(
      `| ${setup} | ${control} | ${median(xs.map((x) => x.drain)).toFixed(0)} | ${drainRatio.toFixed(2)} | ${median(xs.map((x) => x.enqueue)).toFixed(0)} | ${enqueueRatio.toFixed(2)} |`,
    );
  }
}
