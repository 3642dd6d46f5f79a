/**
 * Rate limit accuracy (issue 25, benchmark a): a queue limited to `limit`
 * starts per `periodMs`, a backlog larger than the run can start, and
 * `--processes` worker processes of `--concurrency` each for `--seconds`.
 * Reports, per adapter: the most starts in any window of `periodMs` (by the
 * claim times the limit counts, and by the handlers' own wall-clock starts),
 * and the starts in the run against the most the limit allows
 * (limit × seconds / period, + limit for the window the run opens with).
 * Then the cost of a limit that never binds: a backlog drained with a
 * limit far above the rate, against the same drain with none, as a ratio.
 *
 *   npx tsx bench/rate-limit.ts [--systems sqlite,postgres,mysql] [--processes 4] [--concurrency 10]
 *     [--limit 100] [--period 1000] [--seconds 10] [--drain 20000] [--drain-runs 3] [--skip-accuracy]
 *
 * The drain pair runs `--drain-runs` times, in alternating order (without
 * first, then with first); the ratio reported is the median of the pairs'.
 */
import { Docket } from "../src/index.ts";
import { ADAPTERS, openDatabase, type AdapterName } from "./databases.ts";
import { startChild } from "./children.ts";
import { timeClaims } from "./claim-timing.ts";

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : process.argv[i + 1]!;
};
const systems = arg("systems", ADAPTERS.join(",")).split(",") as AdapterName[];
const processes = Number(arg("processes", "4"));
const concurrency = Number(arg("concurrency", "10"));
const limit = Number(arg("limit", "100"));
const periodMs = Number(arg("period", "1000"));
const seconds = Number(arg("seconds", "10"));
const drainJobs = Number(arg("drain", "20000"));
const drainRuns = Number(arg("drain-runs", "3"));
const skipAccuracy = process.argv.includes("--skip-accuracy");
const CHILD = new URL("./rate-limit-child.ts", import.meta.url).pathname;

/** The most values of sorted `times` inside any half-open window [t, t + width). */
function mostInWindow(times: number[], width: number): number {
  let most = 0;
  for (let i = 0, j = 0; j < times.length; j++) {
    while (times[j]! - times[i]! >= width) i++;
    most = Math.max(most, j - i + 1);
  }
  return most;
}

async function accuracy(system: AdapterName, scenario: number) {
  const db = await openDatabase(system);
  try {
    const adapter = await db.open(scenario);
    await adapter.migrate();
    const docket = new Docket({ adapter });
    const backlog = Math.ceil((limit * seconds * 1000) / periodMs) * 2 + limit;
    for (let i = 0; i < backlog; i += 500) {
      await docket.enqueueMany(Array.from({ length: Math.min(500, backlog - i) }, (_, k) => ({ task: "call", payload: { i: i + k }, options: { queue: "limited" } })));
    }
    await docket.setQueueRateLimit("limited", { limit, periodMs });
    const children = Array.from({ length: processes }, () => startChild([CHILD, JSON.stringify(db.spec(scenario)), String(concurrency), "5"]));
    await Promise.all(children.map((c) => c.next((m) => m.ready === true)));
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const done = children.map((c) => c.next((m) => m.done === true));
    for (const c of children) c.send({ stop: true });
    const results = await Promise.all(done);
    await adapter.close();
    const claims = results.flatMap((r) => r.claims as number[]).sort((a, b) => a - b);
    const starts = results.flatMap((r) => r.starts as number[]).sort((a, b) => a - b);
    const allowed = Math.floor((limit * seconds * 1000) / periodMs) + limit;
    const first = claims[0] ?? 0;
    const inRun = claims.filter((t) => t - first < seconds * 1000).length;
    return { claims: claims.length, mostByClaim: mostInWindow(claims, periodMs), mostByHandler: mostInWindow(starts, periodMs), inRun, allowed: allowed - limit, ratio: inRun / (allowed - limit) };
  } finally {
    await db.dispose();
  }
}

/** Jobs per second draining `drainJobs` in one process at `concurrency` × `processes`, with a queue limit that never binds, or none. */
async function drain(system: AdapterName, scenario: number, limited: boolean): Promise<number> {
  const db = await openDatabase(system);
  try {
    const adapter = await db.open(scenario);
    await adapter.migrate();
    const docket = new Docket({ adapter });
    for (let i = 0; i < drainJobs; i += 500) {
      await docket.enqueueMany(Array.from({ length: Math.min(500, drainJobs - i) }, (_, k) => ({ task: "call", payload: { i: i + k }, options: { queue: "limited" } })));
    }
    if (limited) await docket.setQueueRateLimit("limited", { limit: 100_000, periodMs: 1000 });
    const timing = process.env.BENCH_DEBUG ? timeClaims(adapter) : null;
    let done = 0;
    let finish!: () => void;
    const all = new Promise<void>((r) => (finish = r));
    const started = performance.now();
    const worker = docket.worker({ queues: ["limited"], concurrency: concurrency * processes, logger: null, handlers: { call: async () => void (++done === drainJobs && finish()) } });
    await worker.start();
    await all;
    const rate = drainJobs / ((performance.now() - started) / 1000);
    if (timing) console.log(`  ${limited ? "limited" : "unlimited"}: ${timing.summary()}`);
    await worker.stop();
    await adapter.close();
    return rate;
  } finally {
    await db.dispose();
  }
}

console.log(`rate limit ${limit} per ${periodMs} ms, ${processes} processes × concurrency ${concurrency}, ${seconds} s; then a drain of ${drainJobs} jobs with a limit that never binds against none`);
console.log("| adapter | starts | most in any window (claim times) | most in any window (handler starts) | starts in the run / allowed | drain with limit / without |");
console.log("|---|---|---|---|---|---|");
let scenario = 0;
for (const system of systems) {
  const a = skipAccuracy ? null : await accuracy(system, scenario++);
  const pairs: { withLimit: number; without: number }[] = [];
  for (let run = 0; run < drainRuns; run++) {
    const first = run % 2 === 1;
    const one = await drain(system, scenario++, first);
    const other = await drain(system, scenario++, !first);
    pairs.push(first ? { withLimit: one, without: other } : { withLimit: other, without: one });
  }
  pairs.sort((x, y) => x.withLimit / x.without - y.withLimit / y.without);
  const mid = pairs[Math.floor(pairs.length / 2)]!;
  const all = pairs.map((p) => (p.withLimit / p.without).toFixed(2)).join(", ");
  const accuracyCells = a ? `${a.claims} | ${a.mostByClaim} (limit ${limit}) | ${a.mostByHandler} | ${a.inRun} / ${a.allowed} = ${a.ratio.toFixed(3)}` : "– | – | – | –";
  console.log(`| ${system} | ${accuracyCells} | ${mid.withLimit.toFixed(0)} / ${mid.without.toFixed(0)} jobs/s = ${(mid.withLimit / mid.without).toFixed(2)} (median of ${all}) |`);
}
