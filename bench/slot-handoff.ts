/**
 * Benchmark (not a test): how long a blocked job waits after its key's slot
 * frees, on each adapter.
 *
 *   npm run bench                        # every adapter whose server answers
 *   npm run bench -- --adapter postgres  # one adapter
 *   options: --jobs 200 --poll-ms 1000 --warmup 5
 *
 * Scenarios, each on a fresh database (one worker in this process, queue "bench"):
 *  - key c1:   a chain of N jobs of ONE concurrency key with limit 1 (one
 *              ready, N−1 blocked), worker concurrency 1. Job i's completion
 *              transaction promotes job i+1 (blocked → ready) before it commits.
 *  - key c8:   the same chain, worker concurrency 8 (the worker has idle
 *              capacity, so it sleeps between claims and must be woken).
 *  - baseline: N jobs WITHOUT a key, worker concurrency 1 and prefetch 0:
 *              job i+1 is ready all along and is claimed as soon as handler i
 *              returned — plain sequential processing through the same claim
 *              path. Since issue 9 the worker records outcomes in batches
 *              after the handler's slot frees, so here job i+1 may start
 *              before job i's completion committed (commit → start < 0); a
 *              keyed job i+1 still cannot (its slot frees at that commit).
 *
 * For consecutive jobs i, i+1 (by start time) two delays are measured:
 *  - end → start:    handler i returned → handler i+1 started. Includes job i's
 *                    completion transaction (with the key: lock the key, free
 *                    the slot, promote the next blocked job) and the next claim;
 *  - commit → start: the worker's "succeeded" event for job i (emitted right
 *                    after the completion committed) → handler i+1 started:
 *                    the wake-up plus the claim transaction.
 * The figure reported as the handoff is end → start; the ratio divides it by
 * the baseline's, i.e. how much the key handoff costs relative to plain
 * sequential processing. The first `--warmup` gaps are dropped.
 *
 * What the numbers mean: in these runs the worker that completes job i is the
 * one that claims job i+1; a finished handler wakes its own worker's claim
 * loop at once, so the delay does not depend on `pollMs` (1 s here, far above
 * every measured delay, which proves no handoff waited for a poll). With
 * several workers, a promoted job is taken by whichever worker claims first;
 * a worker that did not free the slot only notices it at its next poll, so
 * there the worst case is bounded by pollMs.
 */
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { Docket } from "../src/client/docket.ts";
import type { DocketAdapter } from "../src/core/adapter.ts";
import { ADAPTERS, openDatabase, type AdapterName, type Database } from "./databases.ts";


const { values: args } = parseArgs({
  options: {
    adapter: { type: "string" },
    jobs: { type: "string", default: "200" },
    "poll-ms": { type: "string", default: "1000" },
    warmup: { type: "string", default: "5" },
  },
  strict: true,
});
const JOBS = Number(args.jobs);
const POLL_MS = Number(args["poll-ms"]);
const WARMUP = Number(args.warmup);
if (![JOBS, POLL_MS, WARMUP].every(Number.isSafeInteger) || JOBS < WARMUP + 3 || POLL_MS < 1) {
  console.error("usage: npm run bench -- [--adapter sqlite|postgres|mysql] [--jobs N (>= warmup + 3)] [--poll-ms N] [--warmup N]");
  process.exit(2);
}
if (args.adapter !== undefined && !ADAPTERS.includes(args.adapter as AdapterName)) {
  console.error(`bench: --adapter must be one of ${ADAPTERS.join(", ")}`);
  process.exit(2);
}
const selected: AdapterName[] = args.adapter ? [args.adapter as AdapterName] : [...ADAPTERS];
const hr = () => performance.timeOrigin + performance.now();

interface Scenario {
  name: string;
  keyed: boolean;
  concurrency: number;
}
const SCENARIOS: Scenario[] = [
  { name: "key c1", keyed: true, concurrency: 1 },
  { name: "key c8", keyed: true, concurrency: 8 },
  { name: "baseline", keyed: false, concurrency: 1 },
];

interface Result {
  endToStart: number[];
  commitToStart: number[];
  seconds: number;
}

async function runScenario(adapter: DocketAdapter, s: Scenario): Promise<Result> {
  const docket = new Docket({ adapter });
  try {
    await docket.migrate();
    const items = Array.from({ length: JOBS }, (_, n) => ({
      task: "bench.job",
      payload: { n },
      options: { queue: "bench", ...(s.keyed ? { concurrency: { key: "chain", limit: 1 } } : {}) },
    }));
    for (let i = 0; i < items.length; i += 100) await docket.enqueueMany(items.slice(i, i + 100));
    const start = new Map<number, number>();
    const end = new Map<number, number>();
    const commit = new Map<number, number>();
    const problems: string[] = [];
    let finished = 0;
    let allDone!: () => void;
    const done = new Promise<void>((r) => (allDone = r));
    const worker = docket.worker({
      queues: ["bench"],
      concurrency: s.concurrency,
      ...(s.keyed ? {} : { prefetch: 0 }),
      pollMs: POLL_MS,
      handlers: {
        "bench.job": (_payload, ctx) => {
          start.set(ctx.job.id, hr());
          end.set(ctx.job.id, hr());
        },
      },
      onEvent: (e) => {
        if (e.type === "succeeded") {
          commit.set(e.job.id, hr());
          if (++finished === JOBS) allDone();
        } else if (e.type !== "started") problems.push(e.type === "error" ? String(e.error) : e.type === "keyRepaired" ? `key ${e.key} repaired` : `${e.type} event for job ${e.job.id}`);
      },
    });
    const t0 = hr();
    await worker.start();
    const timeout = setTimeout(() => problems.push(`timed out after 120 s with ${finished} of ${JOBS} done`), 120_000);
    await Promise.race([done, new Promise((r) => setTimeout(r, 120_000))]);
    clearTimeout(timeout);
    const seconds = (hr() - t0) / 1000;
    await worker.stop();
    if (problems.length > 0) throw new Error(`${s.name}: ${problems.slice(0, 3).join("; ")}`);
    const order = [...start.entries()].sort((a, b) => a[1] - b[1]).map(([id]) => id);
    const endToStart: number[] = [];
    const commitToStart: number[] = [];
    for (let i = WARMUP; i + 1 < order.length; i++) {
      const prev = order[i]!;
      const next = start.get(order[i + 1]!)!;
      endToStart.push(next - end.get(prev)!);
      commitToStart.push(next - commit.get(prev)!);
    }
    return { endToStart, commitToStart, seconds };
  } finally {
    await docket.close();
  }
}

function quantile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}
const median = (v: number[]) => {
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

console.log(`slot-handoff bench: ${JOBS} jobs per scenario, pollMs ${POLL_MS}, first ${WARMUP} gaps dropped; times in ms`);
const lines: string[][] = [["adapter", "scenario", "end→start p50", "p99", "commit→start p50", "p99", "ratio p50", "ratio p99", "jobs/s"]];
let failed = false;
for (const name of selected) {
  let db: Database;
  try {
    db = await openDatabase(name);
  } catch (error) {
    console.warn(`bench: skipping ${name}: ${error instanceof Error ? error.message : String(error)}`);
    failed = args.adapter !== undefined;
    continue;
  }
  try {
    const results = new Map<string, Result>();
    for (const [i, s] of SCENARIOS.entries()) results.set(s.name, await runScenario(await db.open(i), s));
    const base = results.get("baseline")!;
    const b50 = median(base.endToStart);
    const b99 = quantile(base.endToStart, 0.99);
    for (const s of SCENARIOS) {
      const r = results.get(s.name)!;
      const e50 = median(r.endToStart);
      const e99 = quantile(r.endToStart, 0.99);
      // Every keyed gap is a handoff: job i+1 cannot start before job i committed (limit 1).
      if (s.keyed && Math.min(...r.commitToStart) < 0) throw new Error(`${name} ${s.name}: a job started before the previous one committed`);
      lines.push([
        name,
        s.name,
        e50.toFixed(2),
        e99.toFixed(2),
        median(r.commitToStart).toFixed(2),
        quantile(r.commitToStart, 0.99).toFixed(2),
        s.keyed ? `${(e50 / b50).toFixed(2)}x` : "1.00x",
        s.keyed ? `${(e99 / b99).toFixed(2)}x` : "1.00x",
        (JOBS / r.seconds).toFixed(0),
      ]);
    }
  } catch (error) {
    console.error(`bench: ${name} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    failed = true;
  } finally {
    await db.dispose().catch((e) => console.error(`bench: cleanup of ${name} failed: ${String(e)}`));
  }
}
const widths = lines[0]!.map((_, c) => Math.max(...lines.map((l) => (l[c] ?? "").length)));
for (const l of lines) console.log(l.map((cell, c) => (c < 2 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join("  "));
console.log(
  "ratio = the scenario's end→start delay / the baseline's (same adapter, same run): the cost of a key handoff relative to plain sequential processing.",
);
process.exit(failed ? 1 : 0);
