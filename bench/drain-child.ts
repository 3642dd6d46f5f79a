/**
 * One worker process of the drain benchmark. Protocol on stdin/stdout, one
 * JSON line each: it prints {ready} once its worker is built, starts on
 * {go}, prints {progress, n} as jobs succeed, and on {stop} stops and prints
 * {done, succeeded, statements, commits}.
 */
import { createInterface } from "node:readline";
import { Docket } from "../src/index.ts";
import { StatementCounter } from "../src/testing/kysely/statement-counter.ts";
import { openSpec, type StoreSpec } from "./databases.ts";
import { loopDelayMonitor, wallNow } from "./children.ts";

const [specJson, concurrencyArg, extraJson, childJson] = process.argv.slice(2);
/** `priority`: count only jobs of this priority (the scale benchmark's measured jobs); `handlerMs`: each handler waits that long; `queues`: the worker's queues. */
const childOptions = JSON.parse(childJson ?? "{}") as { priority?: number; handlerMs?: number; queues?: string[] };
const handlerMs = childOptions.handlerMs ?? 0;
const spec = JSON.parse(specJson!) as StoreSpec;
const counter = new StatementCounter();
const adapter = await openSpec(spec, { instrument: { wrapDialect: (d) => counter.wrap(d) } });
const docket = new Docket({ adapter });
let succeeded = 0;
let succeededAt = 0;
const loopDelay = loopDelayMonitor();
let reported = 0;
const worker = docket.worker({
  handlers: { noop: handlerMs > 0 ? () => new Promise<void>((resolve) => setTimeout(resolve, handlerMs)) : async () => undefined },
  concurrency: Number(concurrencyArg),
  ...(childOptions.queues ? { queues: childOptions.queues } : {}),
  logger: null,
  onEvent: (e) => {
    if (e.type === "succeeded" && (childOptions.priority === undefined || e.job.priority === childOptions.priority)) {
      succeeded++;
      succeededAt = wallNow();
    }
  },
  ...(JSON.parse(extraJson ?? "{}") as object),
});
const say = (m: object) => process.stdout.write(JSON.stringify(m) + "\n");
const maxRssMb = () => process.resourceUsage().maxRSS / 1024;
const progress = setInterval(() => {
  if (succeeded !== reported) say({ progress: true, n: (reported = succeeded), at: succeededAt, rssMb: maxRssMb() });
}, 20);
say({ ready: true });
for await (const line of createInterface({ input: process.stdin })) {
  const m = JSON.parse(line) as { go?: boolean; stop?: boolean };
  if (m.go) {
    counter.reset();
    loopDelay.start();
    await worker.start();
  }
  if (m.stop) {
    const loopDelayMaxMs = loopDelay.stop();
    await worker.stop();
    clearInterval(progress);
    say({ done: true, succeeded, statements: counter.statements, commits: counter.commits, maxRssMb: maxRssMb(), loopDelayMaxMs });
    await adapter.close();
    process.exit(0);
  }
}
