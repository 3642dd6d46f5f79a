/**
 * A scheduler process of test/process/cron-processes.test.ts: waits for
 * "go" on stdin (so all schedulers start together), runs a scheduler that
 * passes every 20 ms for argv's duration, and prints one JSON line: the
 * ticks THIS process fired, [{ tick, id }].
 */
import { Docket } from "../../src/client/docket.ts";
import { openChildAdapter, waitForGo } from "./go-child.ts";

const [adapter, target, tablePrefix, durationArg] = process.argv.slice(2);
const docket = new Docket({ adapter: await openChildAdapter(adapter!, target!, tablePrefix!, 2) });
const fired: { tick: number; id: number }[] = [];
docket.on("enqueued", (e) => void fired.push({ tick: e.job.runAt, id: e.job.id }));
await waitForGo();
const errors: string[] = [];
const scheduler = docket.scheduler({ intervalMs: 20, onError: (e) => void errors.push(e.message) });
scheduler.start();
await new Promise((r) => setTimeout(r, Number(durationArg)));
await scheduler.stop();
process.stdout.write(JSON.stringify({ fired, errors }) + "\n");
await docket.close();
process.exit(0);
