/**
 * Drain benchmark: N no-op jobs are enqueued, then P worker processes of
 * concurrency C (bench/drain-child.ts) drain them; jobs/s is N over the time
 * from "go" to the last success. Also reports statements and commits per
 * job as the workers' adapters counted them, the enqueue rate, and the
 * longest any worker held its event loop during the drain.
 *
 *   npx tsx bench/drain.ts [--systems sqlite,postgres,mysql,graphile-fast,…] [--jobs 20000]
 *     [--scenarios c10x1,c50x1,c10x4] [--runs 3] [--json out.json] [--worker '{"prefetch":0}'] [--capped 1]
 *     [--handler-ms 0] [--queue-cap N] [--keys K --key-limit L] [--controls none,keys200x1,keys20x5,cap10,cap50,fair100,queues3]
 *
 * --handler-ms: each docket job's handler waits that long (a timer, as for
 * I/O), so the drain measures how claims scale across processes rather than
 * how the 2 cores are shared.
 * --queue-cap: the drained queue has a cap of N (setQueueCap), so every claim
 * takes the cap's accounting. --keys: job i carries concurrency key
 * "k{i mod K}" with limit L (default 1), so claims and outcomes admit and
 * promote under the keys' locks. --controls runs each listed control in
 * every run, side by side (none: no control; keysKxL: K keys of limit L;
 * capN: a queue cap of N; fairF: job i carries fairness key "f{i mod F}";
 * queuesQ: job i is of queue "q{i mod Q}" and the workers claim all Q),
 * and reports each one's enqueue and drain rates
 * as ratios to "none" on the same system and scenario (median of the runs'
 * ratios, each taken within one run).
 * Systems: docket on each adapter (sqlite, postgres, mysql), and the peers of
 * bench/peers.ts on the same PostgreSQL (install them with `npm --prefix
 * bench ci`). Runs alternate: run 1 of every system, then run 2, … so a
 * drift of the machine spreads over all of them. A run that has not drained
 * after --limit seconds (default 120) is reported at the rate it reached.
 */
import { fileURLToPath } from "node:url";
import { Docket } from "../src/index.ts";
import { ADAPTERS, PG_URL, openDatabase, pgAdmin, withDatabase, type AdapterName, type Database } from "./databases.ts";
import { PEERS, isPeer, setupPeer, type PeerName } from "./peers.ts";
import { startChild, wallNow } from "./children.ts";

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!);
const systems = (args.get("systems") ?? args.get("adapters"))?.split(",") ?? [...ADAPTERS, ...PEERS];
for (const name of systems) if (!isPeer(name) && !(ADAPTERS as readonly string[]).includes(name)) throw new Error(`unknown system ${name}`);
const limitSec = Number(args.get("limit") ?? 120);
const jobs = Number(args.get("jobs") ?? 20000);
const runs = Number(args.get("runs") ?? 1);
const scenarios = (args.get("scenarios") ?? "c10x1,c50x1,c10x4").split(",").map((s) => {
  const m = /^c(\d+)x(\d+)$/.exec(s);
  if (!m) throw new Error(`bad scenario ${s}`);
  return { name: s, concurrency: Number(m[1]), processes: Number(m[2]) };
});
const workerExtra = args.get("worker") ?? "{}";
const capped = args.get("capped") === "1";
const handlerMs = Number(args.get("handler-ms") ?? 0);
const queueCap = args.has("queue-cap") ? Number(args.get("queue-cap")) : null;
/** A control the drained jobs carry: none, K concurrency keys of limit L, a queue cap, F fairness keys, or Q queues. */
interface Control {
  name: string;
  keys: number | null;
  keyLimit: number;
  queueCap: number | null;
  fairKeys?: number;
  queues?: number;
}
function parseControl(spec: string): Control {
  if (spec === "none") return { name: spec, keys: null, keyLimit: 1, queueCap: null };
  const k = /^keys(\d+)x(\d+)$/.exec(spec);
  if (k) return { name: spec, keys: Number(k[1]), keyLimit: Number(k[2]), queueCap: null };
  const c = /^cap(\d+)$/.exec(spec);
  if (c) return { name: spec, keys: null, keyLimit: 1, queueCap: Number(c[1]) };
  const f = /^fair(\d+)$/.exec(spec);
  if (f) return { name: spec, keys: null, keyLimit: 1, queueCap: null, fairKeys: Number(f[1]) };
  const q = /^queues(\d+)$/.exec(spec);
  if (q) return { name: spec, keys: null, keyLimit: 1, queueCap: null, queues: Number(q[1]) };
  throw new Error(`bad control ${spec}: none, keysKxL, capN, fairF or queuesQ`);
}
const controls: Control[] = args.has("controls")
  ? args.get("controls")!.split(",").map(parseControl)
  : [{ name: "flags", keys: args.has("keys") ? Number(args.get("keys")) : null, keyLimit: Number(args.get("key-limit") ?? 1), queueCap }];
const CHILD = fileURLToPath(new URL("./drain-child.ts", import.meta.url));
const PEER_CHILD = fileURLToPath(new URL("./peer-child.ts", import.meta.url));

export interface DrainResult {
  system: string;
  scenario: string;
  control: string;
  run: number;
  jobsPerSec: number;
  enqueuePerSec: number;
  statementsPerJob: number;
  commitsPerJob: number;
  /** The longest any worker process's event loop was held during the drain, ms. */
  loopDelayMaxMs: number;
}

/** Fills a fresh store of `system` with the jobs; returns the children's argv and a disposer. */
async function prepare(system: string, n: number, db: Database | null, control: Control): Promise<{ argv: (c: number) => string[]; enqueuePerSec: number; dispose: () => Promise<void> }> {
  if (isPeer(system)) {
    const database = `docket_peer_${process.pid.toString(36)}_${n}`;
    const admin = pgAdmin;
    await admin(`CREATE DATABASE ${database}`);
    const url = withDatabase(PG_URL, database);
    const t0 = performance.now();
    await setupPeer(system as PeerName, url, jobs);
    const enqueuePerSec = jobs / ((performance.now() - t0) / 1000);
    return { argv: (c) => [PEER_CHILD, system, url, String(c)], enqueuePerSec, dispose: () => admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`) };
  }
  const store = await db!.open(n);
  const docket = new Docket({ adapter: store });
  await docket.migrate();
  // --capped: a capped queue and a capped task exist (not the drained ones), as in a deployment that uses caps.
  if (capped) {
    await docket.setQueueCap("reports", 2);
    await docket.setTaskCap("report.build", 1);
  }
  if (control.queueCap !== null) await docket.setQueueCap("default", control.queueCap);
  const { keys, keyLimit } = control;
  const t0 = performance.now();
  for (let i = 0; i < jobs; i += 1000) {
    const batch = Array.from({ length: Math.min(1000, jobs - i) }, (_, k) => ({
      task: "noop",
      payload: { i: i + k },
      ...(keys === null ? {} : { options: { concurrency: { key: `k${(i + k) % keys}`, limit: keyLimit } } }),
      ...(control.fairKeys === undefined ? {} : { options: { fairness: { key: `f${(i + k) % control.fairKeys}` } } }),
      ...(control.queues === undefined ? {} : { options: { queue: `q${(i + k) % control.queues}` } }),
    }));
    await docket.enqueueMany(batch);
  }
  const enqueuePerSec = jobs / ((performance.now() - t0) / 1000);
  await store.close();
  const queues = control.queues === undefined ? undefined : Array.from({ length: control.queues }, (_, q) => `q${q}`);
  return { argv: (c) => [CHILD, JSON.stringify(db!.spec(n)), String(c), workerExtra, JSON.stringify({ handlerMs, queues })], enqueuePerSec, dispose: async () => undefined };
}

async function drainOnce(db: Database | null, n: number, system: string, s: (typeof scenarios)[number], control: Control, run: number): Promise<DrainResult> {
  const { argv, enqueuePerSec, dispose } = await prepare(system, n, db, control);
  const children = Array.from({ length: s.processes }, () => startChild(argv(s.concurrency)));
  await Promise.all(children.map((c) => c.next((m) => m.ready === true)));
  const counts = children.map(() => 0);
  const lastAt = children.map(() => 0);
  let finishedAt = 0;
  let resolveAll!: () => void;
  const all = new Promise<void>((r) => (resolveAll = r));
  children.forEach((c, i) =>
    c.onProgress((k, at) => {
      counts[i] = k;
      lastAt[i] = at;
      if (!finishedAt && counts.reduce((a, b) => a + b, 0) >= jobs) {
        finishedAt = Math.max(...lastAt);
        resolveAll();
      }
    }),
  );
  const start = wallNow();
  for (const c of children) c.send({ go: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([all, new Promise<void>((r) => (timer = setTimeout(r, limitSec * 1000)))]);
  clearTimeout(timer);
  // The time the last job finished in its child, not when its report arrived (a busy child reports late).
  const elapsed = ((finishedAt || wallNow()) - start) / 1000;
  const drained = Math.min(jobs, counts.reduce((a, b) => a + b, 0));
  for (const c of children) c.send({ stop: true });
  const done = await Promise.all(children.map((c) => c.next((m) => m.done === true)));
  const statements = done.reduce((a, m) => a + Number(m.statements), 0);
  const commits = done.reduce((a, m) => a + Number(m.commits), 0);
  await dispose();
  return {
    system,
    scenario: s.name,
    control: control.name,
    run,
    jobsPerSec: drained / elapsed,
    enqueuePerSec,
    statementsPerJob: isPeer(system) ? Number.NaN : statements / jobs,
    commitsPerJob: isPeer(system) ? Number.NaN : commits / jobs,
    loopDelayMaxMs: Math.max(...done.map((m) => Number(m.loopDelayMaxMs))),
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const results: DrainResult[] = [];
let scenarioNo = 0;
const dbs = new Map<string, Database>();
for (const system of systems) if (!isPeer(system)) dbs.set(system, await openDatabase(system as AdapterName));
try {
  for (let run = 1; run <= runs; run++) {
    for (const system of systems) {
      for (const s of scenarios) {
        for (const control of isPeer(system) ? controls.slice(0, 1) : controls) {
          const r = await drainOnce(dbs.get(system) ?? null, ++scenarioNo, system, s, control, run);
          results.push(r);
          console.error(
            `${system} ${s.name} ${control.name} run ${run}: enqueue ${r.enqueuePerSec.toFixed(0)} jobs/s, drain ${r.jobsPerSec.toFixed(0)} jobs/s, ${r.statementsPerJob.toFixed(2)} statements/job, event loop held ${r.loopDelayMaxMs.toFixed(0)} ms at most`,
          );
        }
      }
    }
  }
} finally {
  for (const db of dbs.values()) await db.dispose();
}
if (args.has("controls")) {
  // Each control's rates as ratios to "none" in the same run, system and scenario; median (and spread) over the runs.
  console.log(`| system | scenario | control | enqueue jobs/s | × none | drain jobs/s (median of ${runs}) | drain spread | × none (median of runs' ratios) | ratio spread |`);
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const system of systems) {
    for (const s of scenarios) {
      for (const control of isPeer(system) ? controls.slice(0, 1) : controls) {
        const rs = results.filter((r) => r.system === system && r.scenario === s.name && r.control === control.name);
        const base = (r: DrainResult) => results.find((b) => b.system === system && b.scenario === s.name && b.control === "none" && b.run === r.run);
        const drainRatios = rs.map((r) => (base(r) ? r.jobsPerSec / base(r)!.jobsPerSec : Number.NaN));
        const enqueueRatios = rs.map((r) => (base(r) ? r.enqueuePerSec / base(r)!.enqueuePerSec : Number.NaN));
        const rate = rs.map((r) => r.jobsPerSec);
        console.log(
          `| ${system} | ${s.name} | ${control.name} | ${median(rs.map((r) => r.enqueuePerSec)).toFixed(0)} | ${median(enqueueRatios).toFixed(2)}× | ${median(rate).toFixed(0)} | ${Math.min(...rate).toFixed(0)}–${Math.max(...rate).toFixed(0)} | ${median(drainRatios).toFixed(3)}× | ${Math.min(...drainRatios).toFixed(3)}–${Math.max(...drainRatios).toFixed(3)} |`,
        );
      }
    }
  }
}
const baseline = "graphile-fast";
const fmt = (x: number, d = 0) => (Number.isNaN(x) ? "–" : x.toFixed(d));
console.log(`| system | scenario | jobs/s (median of ${runs}) | spread | × ${baseline} | statements/job | commits/job | enqueue batch jobs/s | event loop held, max ms |`);
console.log("|---|---|---|---|---|---|---|---|---|");
for (const system of systems) {
  for (const s of scenarios) {
    const rs = results.filter((r) => r.system === system && r.scenario === s.name && r.control === controls[0]!.name);
    const rate = rs.map((r) => r.jobsPerSec);
    const base = results.filter((r) => r.system === baseline && r.scenario === s.name).map((r) => r.jobsPerSec);
    const ratio = base.length > 0 ? `${(median(rate) / median(base)).toFixed(2)}×` : "–";
    console.log(
      `| ${system} | ${s.name} | ${median(rate).toFixed(0)} | ${Math.min(...rate).toFixed(0)}–${Math.max(...rate).toFixed(0)} | ${ratio} | ${fmt(median(rs.map((r) => r.statementsPerJob)), 2)} | ${fmt(median(rs.map((r) => r.commitsPerJob)), 2)} | ${median(rs.map((r) => r.enqueuePerSec)).toFixed(0)} | ${fmt(median(rs.map((r) => r.loopDelayMaxMs)))} |`,
    );
  }
}
if (args.get("json")) {
  const { writeFileSync } = await import("node:fs");
  writeFileSync(args.get("json")!, JSON.stringify({ jobs, runs, scenarios: scenarios.map((s) => s.name), controls: controls.map((c) => c.name), results }, null, 2));
}
process.exit(0);
