/**
 * A producer process of test/process/idempotency-processes.test.ts: waits
 * for "go" on stdin (so all producers start together), enqueues one job per
 * key of argv (the same keys in every process, each in its own enqueue), and
 * prints one JSON line: [{ key, id, created }].
 */
import { createInterface } from "node:readline";
import { Docket } from "../../src/core/docket.ts";
import type { DocketAdapter } from "../../src/core/adapter.ts";

const [adapter, target, tablePrefix, keysArg] = process.argv.slice(2);
async function open(): Promise<DocketAdapter> {
  if (adapter === "sqlite") return (await import("../../src/adapters/sqlite/index.ts")).sqliteAdapter({ filename: target!, tablePrefix, busyTimeoutMs: 30_000 });
  if (adapter === "postgres") return (await import("../../src/adapters/postgres/index.ts")).postgresAdapter({ connectionString: target!, tablePrefix, max: 4 });
  return (await import("../../src/adapters/mysql/index.ts")).mysqlAdapter({ uri: target!, tablePrefix, connectionLimit: 4 });
}
const docket = new Docket({ adapter: await open() });
const keys = keysArg!.split(",");
process.stdout.write("ready\n");
for await (const line of createInterface({ input: process.stdin })) if (line === "go") break;
const out = await Promise.all(keys.map(async (key) => {
  const job = await docket.enqueue("t", { pid: process.pid }, { idempotencyKey: key });
  return { key, id: job.id, created: job.created };
}));
process.stdout.write(JSON.stringify(out) + "\n");
await docket.close();
process.exit(0);
