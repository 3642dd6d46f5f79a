/**
 * A producer process of test/process/idempotency-processes.test.ts: waits
 * for "go" on stdin (so all producers start together), enqueues one job per
 * key of argv (the same keys in every process, each in its own enqueue), and
 * prints one JSON line: [{ key, id, created }].
 */
import { Docket } from "../../src/client/docket.ts";
import { openChildAdapter, waitForGo } from "./go-child.ts";

const [adapter, target, tablePrefix, keysArg] = process.argv.slice(2);
const docket = new Docket({ adapter: await openChildAdapter(adapter!, target!, tablePrefix!) });
const keys = keysArg!.split(",");
await waitForGo();
const out = await Promise.all(keys.map(async (key) => {
  const job = await docket.enqueue("t", { pid: process.pid }, { idempotencyKey: key });
  return { key, id: job.id, created: job.created };
}));
process.stdout.write(JSON.stringify(out) + "\n");
await docket.close();
process.exit(0);
