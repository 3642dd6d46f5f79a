/**
 * Keyed enqueue-and-drain benchmark: how fast each system runs jobs under
 * per-key concurrency limits while they arrive, and whether it keeps the
 * limits. For each system, P worker processes of concurrency C
 * (bench/keyed-child.ts) are started and polling first; then this process
 * enqueues N no-op jobs in batches of 1,000, job i carrying key "k{i mod K}"
 * with limit L. The rate is N over the time from the first enqueue to the
 * end of the last handler run (its return; the outcome written after it is
 * not timed). docket on MariaDB has no wake-up from another process, so its
 * workers see the first jobs at their next poll (`pollMs`, 1 s by default;
 * --worker passes options to docket's workers). How each system keys its jobs is in
 * bench/keyed-systems.ts: docket's `concurrency: { key, limit }` on every
 * adapter, graphile-worker 0.18 named queues (one per key; a named queue
 * runs one job at a time, so graphile runs only with L = 1 and is skipped
 * for L > 1), pg-boss 12 groups (group id per key, `groupConcurrency: L`).
 *
 *   npx tsx bench/keyed.ts [--systems docket-postgres,docket-sqlite,docket-mysql,graphile-fast,graphile-defaults,pgboss]
 *     [--jobs 20000] [--keys 200] [--key-limit 1] [--processes 1] [--concurrency 50] [--runs 3]
 *     [--handler-ms 0] [--worker '{"pollMs":100}'] [--limit 120] [--json out.json]
 *
 * Peers need `npm --prefix bench ci`; all PostgreSQL systems share one server.
 *
 * Same-key overlaps (bench/overlaps.ts): every handler records its job, its
 * start and its end with one wall clock shared by the processes
 * (bench/children.ts `wallNow`). Per key, with L = 1, the overlaps are the
 * pairs of runs whose intervals intersect; with L > 1, the starts at which
 * more than L runs of the key were running. A handler waits --handler-ms on
 * a timer (0: one turn of its event loop), so two jobs of one key that a
 * system lets run together are counted only if their handlers' runs
 * intersect: the counts are lower bounds, and a longer --handler-ms shows
 * more of them. Keys are assigned round-robin, so a system that ignored
 * keys altogether would overlap only when it runs jobs more than K apart in
 * the queue at once: with the defaults (K 200, one process of 50), docket
 * with its keys removed showed no overlap in 2,000 jobs, and 7,700 with
 * --keys 10. To test strictness, run with K well below the jobs in flight
 * (C × P, or a peer's batches). Overlaps are reported, never a failure:
 * pg-boss counts a group's active jobs inside each fetch statement
 * (fetchNextJob in its dist/plans.js), so concurrent fetches, which do not
 * see each other's uncommitted claims, can exceed the limit. Also
 * reported: the most runs of one key seen at once, and runs beyond one per
 * job.
 *
 * Runs alternate (run 1 of every system, then run 2, …). Each run prints a
 * table; the summary gives each system's median rate over the runs, their
 * spread, the median of each run's ratio to the best graphile configuration
 * of that run, and the overlaps of every run. A run that has not drained
 * after --limit seconds is reported at the rate it reached.
 */
import { fileURLToPath } from "node:url";
import { openDatabase, type AdapterName, type Database } from "./databases.ts";
import { startChild, wallNow } from "./children.ts";
import { KEYED_SYSTEMS, adapterOf, isKeyedSystem, maxKeyLimit, openKeyedStore, type KeyedSystem } from "./keyed-systems.ts";
import { sameKeyOverlaps, type KeyedRun } from "./overlaps.ts";

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!);
const jobs = Number(args.get("jobs") ?? 20000);
const keys = Number(args.get("keys") ?? 200);
const keyLimit = Number(args.get("key-limit") ?? 1);
const processes = Number(args.get("processes") ?? 1);
const concurrency = Number(args.get("concurrency") ?? 50);
const runs = Number(args.get("runs") ?? 3);
const handlerMs = Number(args.get("handler-ms") ?? 0);
const limitSec = Number(args.get("limit") ?? 120);
const workerOptions = JSON.parse(args.get("worker") ?? "{}") as object;
for (const [name, value] of Object.entries({ jobs, keys, "key-limit": keyLimit, processes, concurrency, runs })) {
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer, got ${args.get(name)}`);
}
const requested = args.get("systems")?.split(",") ?? [...KEYED_SYSTEMS];
for (const name of requested) if (!isKeyedSystem(name)) throw new Error(`unknown system ${name}: one of ${KEYED_SYSTEMS.join(", ")}`);
const systems = (requested as KeyedSystem[]).filter((s) => {
  if (keyLimit <= maxKeyLimit(s)) return true;
  console.error(`${s}: skipped, graphile-worker's named queues run one job at a time (no key limit of ${keyLimit})`);
  return false;
});
const CHILD = fileURLToPath(new URL("./keyed-child.ts", import.meta.url));

interface KeyedResult {
  system: KeyedSystem;
  run: number;
  jobsPerSec: number;
  /** Seconds from the first enqueue to the last enqueue's return. */
  enqueueSec: number;
  /** Seconds from the first enqueue to the end of the last handler run. */
  drainSec: number;
  /** Distinct jobs whose handler ran. */
  drained: number;
  overlaps: number;
  keysOverLimit: number;
  maxRunning: number;
  /** Handler runs beyond one per job. */
  extraRuns: number;
}

async function keyedOnce(system: KeyedSystem, scenario: number, db: Database | null, run: number): Promise<KeyedResult> {
  const store = await openKeyedStore(system, scenario, db, keys, keyLimit);
  const childOptions = JSON.stringify({ keyLimit, handlerMs, worker: workerOptions });
  const children = Array.from({ length: processes }, () => startChild([CHILD, system, JSON.stringify(store.location), String(concurrency), childOptions]));
  await Promise.all(children.map((c) => c.next((m) => m.ready === true)));
  const counts = children.map(() => 0);
  let resolveAll!: () => void;
  const all = new Promise<void>((r) => (resolveAll = r));
  children.forEach((c, i) =>
    c.onProgress((n) => {
      counts[i] = n;
      if (counts.reduce((a, b) => a + b, 0) >= jobs) resolveAll();
    }),
  );
  const start = wallNow();
  for (let i = 0; i < jobs; i += 1000) await store.enqueue(i, Math.min(1000, jobs - i));
  const enqueuedAt = wallNow();
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([all, new Promise<void>((r) => (timer = setTimeout(r, limitSec * 1000)))]);
  clearTimeout(timer);
  const stoppedAt = wallNow();
  for (const c of children) c.send({ stop: true });
  const done = await Promise.all(children.map((c) => c.next((m) => m.done === true)));
  await store.dispose();
  const keyed: KeyedRun[] = [];
  const seen = new Set<number>();
  let lastEnd = 0;
  for (const m of done) {
    const flat = m.runs as number[];
    for (let k = 0; k < flat.length; k += 3) {
      const [i, s, e] = [flat[k]!, flat[k + 1]!, flat[k + 2]!];
      keyed.push({ key: i % keys, start: s, end: e });
      seen.add(i);
      if (e <= stoppedAt && e > lastEnd) lastEnd = e;
    }
  }
  const drainSec = ((seen.size >= jobs ? lastEnd : stoppedAt) - start) / 1000;
  const { overlaps, keysOverLimit, maxRunning } = sameKeyOverlaps(keyed, keyLimit);
  return {
    system,
    run,
    jobsPerSec: seen.size / drainSec,
    enqueueSec: (enqueuedAt - start) / 1000,
    drainSec,
    drained: seen.size,
    overlaps,
    keysOverLimit,
    maxRunning,
    extraRuns: keyed.length - seen.size,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
/** A result's rate over the best graphile configuration's in the same run (NaN without one). */
function graphileRatio(r: KeyedResult, all: KeyedResult[]): number {
  const best = Math.max(...all.filter((b) => b.run === r.run && b.system.startsWith("graphile")).map((b) => b.jobsPerSec));
  return best > 0 ? r.jobsPerSec / best : Number.NaN;
}
const ratio = (x: number) => (Number.isNaN(x) ? "–" : `${x.toFixed(2)}×`);
const setup = `${jobs} jobs, ${keys} keys × limit ${keyLimit}, ${processes} process${processes > 1 ? "es" : ""} × concurrency ${concurrency}, handler ${handlerMs} ms`;

function printRun(run: number, all: KeyedResult[]): void {
  console.log(`\n### Run ${run} of ${runs}: ${setup}\n`);
  console.log("| system | jobs/s | × best graphile | enqueue s | drain s | jobs drained | same-key overlaps | keys over limit | max running per key | extra runs |");
  console.log("|---|---|---|---|---|---|---|---|---|---|");
  for (const r of all.filter((x) => x.run === run)) {
    console.log(
      `| ${r.system} | ${r.jobsPerSec.toFixed(0)} | ${ratio(graphileRatio(r, all))} | ${r.enqueueSec.toFixed(2)} | ${r.drainSec.toFixed(2)} | ${r.drained} | ${r.overlaps} | ${r.keysOverLimit} | ${r.maxRunning} | ${r.extraRuns} |`,
    );
  }
}

const results: KeyedResult[] = [];
const dbs = new Map<AdapterName, Database>();
let scenario = 0;
try {
  for (const system of systems) {
    const adapter = adapterOf(system);
    if (adapter !== null && !dbs.has(adapter)) dbs.set(adapter, await openDatabase(adapter));
  }
  for (let run = 1; run <= runs; run++) {
    for (const system of systems) {
      const adapter = adapterOf(system);
      const r = await keyedOnce(system, ++scenario, adapter === null ? null : dbs.get(adapter)!, run);
      results.push(r);
      console.error(`${system} run ${run}: ${r.jobsPerSec.toFixed(0)} jobs/s, ${r.overlaps} same-key overlaps, at most ${r.maxRunning} running per key`);
    }
    printRun(run, results);
  }
} finally {
  for (const db of dbs.values()) await db.dispose();
}
console.log(`\n### Summary: ${setup}, ${runs} run${runs > 1 ? "s" : ""}\n`);
console.log(`| system | jobs/s (median of ${runs}) | spread | × best graphile (median of runs' ratios) | same-key overlaps per run | max running per key | extra runs |`);
console.log("|---|---|---|---|---|---|---|");
for (const system of systems) {
  const rs = results.filter((r) => r.system === system);
  const rate = rs.map((r) => r.jobsPerSec);
  console.log(
    `| ${system} | ${median(rate).toFixed(0)} | ${Math.min(...rate).toFixed(0)}–${Math.max(...rate).toFixed(0)} | ${ratio(median(rs.map((r) => graphileRatio(r, results))))} | ${rs.map((r) => r.overlaps).join(", ")} | ${Math.max(...rs.map((r) => r.maxRunning))} | ${rs.reduce((a, r) => a + r.extraRuns, 0)} |`,
  );
}
if (args.get("json")) {
  const { writeFileSync } = await import("node:fs");
  writeFileSync(args.get("json")!, JSON.stringify({ jobs, keys, keyLimit, processes, concurrency, handlerMs, runs, results }, null, 2));
}
process.exit(0);
