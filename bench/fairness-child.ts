/**
 * One worker process of the fairness benchmark (bench/fairness.ts): a
 * docket worker on queue "fair" whose handlers record, for small jobs, the
 * start latency (wall clock now − the payload's enqueue time) and, for flood
 * jobs, how many started and when the last did. Prints {ready} once the
 * worker runs, {progress, flood} every 100 ms, and on {stop} stops the
 * worker and prints {done, latencies, ats, starts, flood, floodLast, cpu}
 * (ats: each small job's enqueue time, starts: [id, start time] of each;
 * cpu: its own CPU seconds). With BENCH_DEBUG its stderr line also splits the small jobs' latency
 * at their claim's start (`startedAt`): waiting for a claim, then the claim and the wait for a handler.
 *
 * With a fourth argument "separate", a second worker of the same concurrency
 * serves queue "bulk" in the same process (the flood on a queue of its own:
 * the small keys keep their own slots, the machine's load is the flood's).
 *
 * argv: store spec (JSON), concurrency, pollMs[, "separate"].
 */
import { createInterface } from "node:readline";
import { Docket, type JobContext } from "../src/index.ts";
import { openSpec, type StoreSpec } from "./databases.ts";
import { wallNow } from "./children.ts";
import { timeClaims } from "./claim-timing.ts";

const [specJson, concurrencyArg, pollArg, separateArg] = process.argv.slice(2);
const adapter = await openSpec(JSON.parse(specJson!) as StoreSpec);
const timing = process.env.BENCH_DEBUG ? timeClaims(adapter) : null;
const latencies: number[] = [];
const ats: number[] = [];
const starts: [number, number][] = [];
/** BENCH_DEBUG: each small job's enqueue call → its claim's start (startedAt), and claim start → handler start, ms. */
const toClaim: number[] = [];
const claimToStart: number[] = [];
let flood = 0;
let floodLast = 0;
const docket = new Docket({ adapter });
const options = (queue: string) => ({
  queues: [queue],
  concurrency: Number(concurrencyArg),
  pollMs: Number(pollArg),
  ...(process.env.BENCH_PREFETCH ? { prefetch: Number(process.env.BENCH_PREFETCH) } : {}),
  logger: null,
  handlers: {
    small: async (p: unknown, ctx: JobContext<unknown>) => {
      const now = wallNow();
      latencies.push(now - (p as { at: number }).at);
      ats.push((p as { at: number }).at);
      starts.push([ctx.job.id, now]);
      if (timing && ctx.job.startedAt !== null) {
        toClaim.push(ctx.job.startedAt - (p as { at: number }).at);
        claimToStart.push(now - ctx.job.startedAt);
      }
    },
    flood: async () => {
      flood++;
      floodLast = wallNow();
    },
  },
});
const workers = [docket.worker(options("fair")), ...(separateArg === "separate" ? [docket.worker(options("bulk"))] : [])];
for (const worker of workers) await worker.start();
const say = (m: object) => process.stdout.write(JSON.stringify(m) + "\n");
say({ ready: true });
const timer = setInterval(() => say({ progress: false, flood }), 100);
for await (const line of createInterface({ input: process.stdin })) {
  if ((JSON.parse(line) as { stop?: boolean }).stop) {
    clearInterval(timer);
    await Promise.all(workers.map((worker) => worker.stop()));
    if (timing) {
      const q = (xs: number[], p: number) => (xs.length === 0 ? NaN : xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!).toFixed(1);
      process.stderr.write(`child: ${timing.summary()}; small jobs: call → claim start p50 ${q(toClaim, 0.5)} p99 ${q(toClaim, 0.99)} ms, claim start → handler p50 ${q(claimToStart, 0.5)} p99 ${q(claimToStart, 0.99)} ms\n`);
    }
    await adapter.close();
    // A pipe's writes are asynchronous: exit once this (large) line is out.
    const used = process.cpuUsage();
    process.stdout.write(JSON.stringify({ done: true, latencies, ats, starts, flood, floodLast, cpu: (used.user + used.system) / 1e6 }) + "\n", () => process.exit(0));
  }
}
