/**
 * One worker process of the fairness benchmark (bench/fairness.ts): a
 * docket worker on queue "fair" whose handlers record, for small jobs, the
 * start latency (wall clock now − the payload's enqueue time) and, for flood
 * jobs, how many started and when the last did. Prints {ready} once the
 * worker runs, {progress, flood} every 100 ms, and on {stop} stops the
 * worker and prints {done, latencies, ats, starts, flood, floodLast, cpu}
 * (ats: each small job's enqueue time, starts: [id, start time] of each;
 * cpu: its own CPU seconds).
 *
 * argv: store spec (JSON), concurrency, pollMs.
 */
import { createInterface } from "node:readline";
import { Docket } from "../src/index.ts";
import { openSpec, type StoreSpec } from "./databases.ts";
import { wallNow } from "./children.ts";
import { timeClaims } from "./claim-timing.ts";

const [specJson, concurrencyArg, pollArg] = process.argv.slice(2);
const adapter = await openSpec(JSON.parse(specJson!) as StoreSpec);
const timing = process.env.BENCH_DEBUG ? timeClaims(adapter) : null;
const latencies: number[] = [];
const ats: number[] = [];
const starts: [number, number][] = [];
let flood = 0;
let floodLast = 0;
const worker = new Docket({ adapter }).worker({
  queues: ["fair"],
  concurrency: Number(concurrencyArg),
  pollMs: Number(pollArg),
  ...(process.env.BENCH_PREFETCH ? { prefetch: Number(process.env.BENCH_PREFETCH) } : {}),
  logger: null,
  handlers: {
    small: async (p: unknown, ctx) => {
      const now = wallNow();
      latencies.push(now - (p as { at: number }).at);
      ats.push((p as { at: number }).at);
      starts.push([ctx.job.id, now]);
    },
    flood: async () => {
      flood++;
      floodLast = wallNow();
    },
  },
});
await worker.start();
const say = (m: object) => process.stdout.write(JSON.stringify(m) + "\n");
say({ ready: true });
const timer = setInterval(() => say({ progress: false, flood }), 100);
for await (const line of createInterface({ input: process.stdin })) {
  if ((JSON.parse(line) as { stop?: boolean }).stop) {
    clearInterval(timer);
    await worker.stop();
    if (timing) process.stderr.write(`child: ${timing.summary()}\n`);
    await adapter.close();
    // A pipe's writes are asynchronous: exit once this (large) line is out.
    const used = process.cpuUsage();
    process.stdout.write(JSON.stringify({ done: true, latencies, ats, starts, flood, floodLast, cpu: (used.user + used.system) / 1e6 }) + "\n", () => process.exit(0));
  }
}
