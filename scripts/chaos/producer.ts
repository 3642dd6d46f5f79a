/**
 * A producer process of the chaos suite's producer scenario: enqueues
 * batches of `size` jobs with `enqueueMany`, each tagged with its batch
 * name, and appends "returned <batch>" to its file once a call returned. The
 * parent SIGKILLs it at random moments, often inside a call.
 */
import { appendFileSync } from "node:fs";
import { Docket } from "../../src/client/docket.ts";
import type { DocketAdapter } from "../../src/core/adapter.ts";
import type { ChaosWorkerConfig } from "./worker.ts";

const config = JSON.parse(process.argv[2] ?? "null") as (Pick<ChaosWorkerConfig, "adapter" | "target" | "tablePrefix" | "out"> & { size: number }) | null;
if (!config) process.exit(2);

async function open(): Promise<DocketAdapter> {
  const c = config!;
  if (c.adapter === "sqlite") return (await import("../../src/adapters/sqlite/index.ts")).sqliteAdapter({ filename: c.target, tablePrefix: c.tablePrefix, busyTimeoutMs: 30_000 });
  if (c.adapter === "postgres") return (await import("../../src/adapters/postgres/index.ts")).postgresAdapter({ connectionString: c.target, tablePrefix: c.tablePrefix, max: 2 });
  return (await import("../../src/adapters/mysql/index.ts")).mysqlAdapter({ uri: c.target, tablePrefix: c.tablePrefix, connectionLimit: 2 });
}

const docket = new Docket({ adapter: await open() });
process.send?.({ type: "ready" });
for (let i = 0; ; i++) {
  const batch = `${process.pid}-${i}`;
  await docket.enqueueMany(Array.from({ length: config.size }, (_, n) => ({ task: "chaos.batch", payload: { batch, n }, options: { queue: "produced" } })));
  appendFileSync(config.out, `returned ${batch}\n`);
}
