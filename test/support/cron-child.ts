/**
 * A scheduler process of test/process/cron-processes.test.ts: waits for
 * "go" on stdin (so all schedulers start together), runs a scheduler that
 * passes every 20 ms for argv's duration, and prints one JSON line: the
 * ticks THIS process fired, [{ tick, id }].
 */
import { createInterface } from "node:readline";
import { Docket } from "../../src/core/docket.ts";
import type { DocketAdapter } from "../../src/core/adapter.ts";

const [adapter, target, tablePrefix, durationArg] = process.argv.slice(2);
async function open(): Promise<DocketAdapter> {
  if (adapter === "sqlite") return (await import("../../src/adapters/sqlite/index.ts")).sqliteAdapter({ filename: target!, tablePrefix, busyTimeoutMs: 30_000 });
  if (adapter === "postgres") return (await import("../../src/adapters/postgres/index.ts")).postgresAdapter({ connectionString: target!, tablePrefix, max: 2 });
  return (await import("../../src/adapters/mysql/index.ts")).mysqlAdapter({ uri: target!, tablePrefix, connectionLimit: 2 });
}
const docket = new Docket({ adapter: await open() });
const fired: { tick: number; id: number }[] = [];
docket.on("enqueued", (e) => void fired.push({ tick: e.job.runAt, id: e.job.id }));
process.stdout.write("ready\n");
for await (const line of createInterface({ input: process.stdin })) if (line === "go") break;
const errors: string[] = [];
const scheduler = docket.scheduler({ intervalMs: 20, onError: (e) => void errors.push(e.message) });
scheduler.start();
await new Promise((r) => setTimeout(r, Number(durationArg)));
await scheduler.stop();
process.stdout.write(JSON.stringify({ fired, errors }) + "\n");
await docket.close();
process.exit(0);
