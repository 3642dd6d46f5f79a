/**
 * The flooding producer of the fairness benchmark (bench/fairness.ts), in a
 * process of its own (a tenant's importer is not the other tenants' web
 * server: building its batches must not hold their enqueues' event loop).
 * Prints {ready}; on {go} enqueues N jobs of task "flood" on queue "fair"
 * in batches of 1,000 (with fairness key "flood" when told), one after
 * another, and prints {done, first, enqueuedMs} (first: the wall-clock time
 * of the first batch's call) and exits; or {error} if an enqueue failed.
 *
 * "separate": the jobs go to queue "bulk" instead, without fairness keys.
 *
 * argv: store spec (JSON), N, "fair", "plain" or "separate".
 */
import { createInterface } from "node:readline";
import { Docket } from "../src/index.ts";
import { openSpec, type StoreSpec } from "./databases.ts";
import { wallNow } from "./children.ts";

const [specJson, jobsArg, kind] = process.argv.slice(2);
const jobs = Number(jobsArg);
const adapter = await openSpec(JSON.parse(specJson!) as StoreSpec);
const client = new Docket({ adapter });
const options = { queue: kind === "separate" ? "bulk" : "fair", ...(kind === "fair" ? { fairness: { key: "flood" } } : {}) };
// Opens the pool's connection before the measured part.
await client.stats();
const say = (m: object) => process.stdout.write(JSON.stringify(m) + "\n");
say({ ready: true });
for await (const line of createInterface({ input: process.stdin })) {
  if (!(JSON.parse(line) as { go?: boolean }).go) continue;
  const first = wallNow();
  try {
    for (let i = 0; i < jobs; i += 1000) {
      await client.enqueueMany(Array.from({ length: Math.min(1000, jobs - i) }, () => ({ task: "flood", payload: {}, options })) as never);
    }
  } catch (e) {
    process.stdout.write(JSON.stringify({ error: String((e as Error)?.stack ?? e) }) + "\n", () => process.exit(1));
    break;
  }
  const enqueuedMs = wallNow() - first;
  await adapter.close();
  process.stdout.write(JSON.stringify({ done: true, first, enqueuedMs }) + "\n", () => process.exit(0));
}
