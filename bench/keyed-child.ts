/**
 * One worker process of the keyed benchmark (bench/keyed.ts). Protocol on
 * stdin/stdout, one JSON line each (bench/children.ts): it starts its
 * worker, then prints {ready}; prints {progress, n, at} as handlers finish;
 * on {stop} stops the worker and prints {done, runs}, `runs` the flat list
 * [i, start, end, …] of every handler run (job i, wall-clock ms).
 *
 * argv: system, location (JSON), concurrency, options (JSON: keyLimit,
 * handlerMs, worker: docket worker options). A handler records its start,
 * waits `handlerMs` on a timer (0: one turn of the event loop, so the jobs a
 * worker started together are running together), and records its end.
 */
import { createInterface } from "node:readline";
import { wallNow } from "./children.ts";
import { startKeyedWorker, type KeyedSystem, type Location } from "./keyed-systems.ts";

const [system, locationJson, concurrencyArg, optionsJson] = process.argv.slice(2);
const options = JSON.parse(optionsJson!) as { keyLimit: number; handlerMs: number; worker: object };
const pause = options.handlerMs > 0 ? () => new Promise<void>((resolve) => setTimeout(resolve, options.handlerMs)) : () => new Promise<void>((resolve) => setImmediate(resolve));
const runs: number[] = [];
let finished = 0;
let finishedAt = 0;
const run = async (i: number) => {
  const start = wallNow();
  await pause();
  const end = wallNow();
  runs.push(i, start, end);
  finished++;
  finishedAt = end;
};
const worker = await startKeyedWorker(system as KeyedSystem, JSON.parse(locationJson!) as Location, Number(concurrencyArg), options.keyLimit, run, options.worker);
const say = (m: object) => process.stdout.write(JSON.stringify(m) + "\n");
let reported = 0;
const progress = setInterval(() => {
  if (finished !== reported) say({ progress: true, n: (reported = finished), at: finishedAt, rssMb: 0 });
}, 20);
say({ ready: true });
for await (const line of createInterface({ input: process.stdin })) {
  const m = JSON.parse(line) as { stop?: boolean };
  if (m.stop) {
    await worker.stop();
    clearInterval(progress);
    // A large report to a pipe is written asynchronously: exit once it is flushed, not before.
    process.stdout.write(JSON.stringify({ done: true, runs }) + "\n", () => process.exit(0));
  }
}
