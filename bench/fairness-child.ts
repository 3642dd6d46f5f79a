/**
 * One worker process of the fairness benchmark (bench/fairness.ts): a
 * docket worker on queue "fair" whose handlers record, for small jobs, the
 * start latency (wall clock now − the payload's enqueue time) and, for flood
 * jobs, how many started and when the last did. Prints {ready} once the
 * worker runs, {progress, flood} every 100 ms, and on {stop} stops the
 * worker and prints {done, latencies, flood, floodLast}.
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
const splits: [number, number, number][] = [];
let flood = 0;
let floodLast = 0;
const worker = new Docket({ adapter }).worker({
  queues: ["fair"],
  concurrency: Number(concurrencyArg),
  pollMs: Number(pollArg),
  ...(process.env.BENCH_PREFETCH ? { prefetch: Number(process.env.BENCH_PREFETCH) } : {}),
  logger: null,
  handlers: {
    small: async (p: unknown, ctx: { job: { startedAt?: number | null; createdAt?: number } }) => {
      const now = wallNow();
      latencies.push(now - (p as { at: number }).at);
      if (process.env.BENCH_DEBUG) splits.push([(ctx.job.createdAt ?? 0) - (p as { at: number }).at, (ctx.job.startedAt ?? 0) - (ctx.job.createdAt ?? 0), now - (ctx.job.startedAt ?? 0)]);
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
    if (process.env.BENCH_DEBUG && splits.length > 0) {
      const med = (k: number) => splits.map((x) => x[k]!).sort((a, b) => a - b)[Math.floor(splits.length / 2)]!.toFixed(1);
      const p99 = (k: number) => splits.map((x) => x[k]!).sort((a, b) => a - b)[Math.floor(splits.length * 0.99)]!.toFixed(1);
      if (timing) process.stderr.write(`child: ${timing.summary()}\n`);
      process.stderr.write(`child: enqueue-call→created p50 ${med(0)} p99 ${p99(0)}; created→claimed p50 ${med(1)} p99 ${p99(1)}; claimed→start p50 ${med(2)} p99 ${p99(2)} (${splits.length})\n`);
    }
    await adapter.close();
    // A pipe's writes are asynchronous: exit once this (large) line is out.
    process.stdout.write(JSON.stringify({ done: true, latencies, flood, floodLast }) + "\n", () => process.exit(0));
  }
}
