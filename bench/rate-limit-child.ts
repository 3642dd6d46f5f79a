/**
 * One worker process of the rate-limit benchmark (bench/rate-limit.ts):
 * prints {ready} once its worker runs; each handler records the job's claim
 * time (`job.startedAt`, the start a rate limit counts) and its own
 * wall-clock start; on {stop} stops the worker and prints {done, claims,
 * starts}.
 *
 * argv: store spec (JSON), concurrency, handlerMs.
 */
import { createInterface } from "node:readline";
import { Docket } from "../src/index.ts";
import { openSpec, type StoreSpec } from "./databases.ts";
import { wallNow } from "./children.ts";

const [specJson, concurrencyArg, handlerMsArg] = process.argv.slice(2);
const adapter = await openSpec(JSON.parse(specJson!) as StoreSpec);
const claims: number[] = [];
const starts: number[] = [];
const handlerMs = Number(handlerMsArg);
const worker = new Docket({ adapter }).worker({
  queues: ["limited"],
  concurrency: Number(concurrencyArg),
  logger: null,
  handlers: {
    call: async (_payload: unknown, ctx: { job: { startedAt: number | null } }) => {
      claims.push(ctx.job.startedAt!);
      starts.push(wallNow());
      await new Promise((r) => setTimeout(r, handlerMs));
    },
  },
});
await worker.start();
const say = (m: object) => process.stdout.write(JSON.stringify(m) + "\n");
say({ ready: true });
for await (const line of createInterface({ input: process.stdin })) {
  if ((JSON.parse(line) as { stop?: boolean }).stop) {
    await worker.stop();
    await adapter.close();
    say({ done: true, claims, starts });
    process.exit(0);
  }
}
