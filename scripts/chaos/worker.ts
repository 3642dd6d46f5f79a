/**
 * One worker process of the chaos suite (scripts/chaos.ts). It opens its own
 * Docket on the shared database, runs one worker over every chaos queue,
 * and appends one NDJSON line per handler start and per outcome event to its
 * own file (synchronously: what a SIGKILL interrupts is at most a partial
 * last line, which the parent skips). A job whose payload says `failFirst: k`
 * throws on its attempts 1..k (a planned failure, retried with backoff).
 *
 * The parent sends { type: "stop" } over IPC for a graceful stop, or SIGKILL.
 */
import { appendFileSync } from "node:fs";
import { Docket } from "../../src/client/docket.ts";
import type { DocketAdapter } from "../../src/core/adapter.ts";
import type { WorkerEvent } from "../../src/worker/index.ts";

export interface ChaosWorkerConfig {
  adapter: "sqlite" | "postgres" | "mysql";
  target: string;
  tablePrefix: string;
  out: string;
  queues: string[];
  leaseMs: number;
}

export interface ChaosPayload {
  n: number;
  /** The handler throws on attempts 1..failFirst. */
  failFirst: number;
  sleepMs: number;
  /**
   * A workflow job: it runs step "charge" (its function logs a `stepRun`
   * line), then, after any planned failure, writes its row to the effects
   * table in `ctx.transaction`, which completes it.
   */
  workflow?: boolean;
}

const config = JSON.parse(process.argv[2] ?? "null") as ChaosWorkerConfig | null;
if (!config || typeof process.send !== "function") {
  console.error("chaos worker: run me from scripts/chaos.ts");
  process.exit(2);
}
const pid = process.pid;
const record = (line: Record<string, unknown>) => appendFileSync(config.out, JSON.stringify({ ...line, pid, t: Date.now() }) + "\n");

async function open(c: ChaosWorkerConfig): Promise<DocketAdapter> {
  if (c.adapter === "sqlite") return (await import("../../src/adapters/sqlite/index.ts")).sqliteAdapter({ filename: c.target, tablePrefix: c.tablePrefix, busyTimeoutMs: 30_000 });
  if (c.adapter === "postgres") return (await import("../../src/adapters/postgres/index.ts")).postgresAdapter({ connectionString: c.target, tablePrefix: c.tablePrefix, max: 4 });
  return (await import("../../src/adapters/mysql/index.ts")).mysqlAdapter({ uri: c.target, tablePrefix: c.tablePrefix, connectionLimit: 4 });
}

const docket = new Docket({ adapter: await open(config), retry: { baseMs: 20, maxMs: 200, jitter: 0.5 } });
const worker = docket.worker({
  queues: config.queues,
  concurrency: 6,
  pollMs: 20,
  leaseMs: config.leaseMs,
  logger: null,
  handlers: {
    "chaos.job": async (payload, ctx) => {
      const p = payload as ChaosPayload;
      const { id, attempt } = ctx.job;
      record({ k: "start", id, attempt });
      await new Promise((r) => setTimeout(r, p.sleepMs));
      if (p.workflow) await ctx.step("charge", () => (record({ k: "stepRun", id, attempt }), { attempt }));
      if (attempt <= p.failFirst) throw new Error(`planned failure of attempt ${attempt}`);
      if (p.workflow) {
        // deno-lint-ignore no-explicit-any
        await ctx.transaction(async (trx: any) => void (await trx.insertInto(`${config.tablePrefix}effects`).values({ job_id: id, attempt }).execute()));
      }
    },
  },
  onEvent: (e: WorkerEvent) => {
    if (e.type === "error") record({ k: "error", operation: e.operation, error: String((e.error as Error)?.message ?? e.error).slice(0, 300) });
    else if (e.type === "keyRepaired") record({ k: "event", type: e.type, key: e.key });
    else if (e.type !== "started") record({ k: "event", type: e.type, id: e.job.id, attempt: e.job.attempt });
  },
});
process.on("message", (m: { type?: string }) => {
  if (m?.type !== "stop") return;
  void worker
    .stop({ timeoutMs: 5_000 })
    .then(() => docket.close())
    .then(() => process.exit(0), (error) => (console.error(error), process.exit(1)));
});
await worker.start();
process.send({ type: "ready" });
