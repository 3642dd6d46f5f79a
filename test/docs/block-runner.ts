/**
 * Runs one documentation code block for test/docs/run-blocks.test.ts:
 *
 *     node --import tsx test/docs/block-runner.ts <block.ts>
 *
 * in the block's own temporary directory. First the prelude: what
 * test/docs/fragment-globals.d.ts declares, defined for real as globals (a
 * block's own imports and declarations shadow them): `docket`, a migrated
 * Docket on `adapter`; `db`, the application's kysely instance on the same
 * database, with its tables `orders` and `shipments`; on PostgreSQL `pool`;
 * and the values and services the fragments name. The database is
 * DOCKET_BLOCK_TARGET: "sqlite" (a file `docket.db` here, one handle for
 * kysely and docket), or "postgres" / "mysql" at DOCKET_BLOCK_URL (a fresh
 * database the test creates and drops).
 *
 * Then the block, imported; with DOCKET_BLOCK_START_ONLY_MS=N it need not
 * settle: it must not throw within N ms. Then the postlude: workers the block
 * started get a grace period to finish the jobs they can take (up to
 * GRACE_MS), then every worker and scheduler made through a Docket is
 * stopped and every adapter used closed (unless the block closed it), and
 * the runner prints RUNNER_DONE and exits 0. Anything thrown, an unhandled
 * rejection, or trouble on a Docket the block used (a job retried, dead,
 * lost or reclaimed; an error a worker survived) exits non-zero.
 */
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import type { Kysely } from "kysely";
import { Docket, type DocketAdapter, type DocketEvent, type Worker } from "../../src/index.ts";

/** What the runner prints last, once the block ran and everything it started is stopped (run-blocks.ts looks for it). */
const RUNNER_DONE = "docket-block-runner: done";
/** How long started workers get, after the block settled, to finish what they can take. */
const GRACE_MS = 3_000;

const blockFile = process.argv[2];
if (!blockFile) throw new Error("usage: block-runner.ts <block.ts>");
const target = process.env.DOCKET_BLOCK_TARGET ?? "sqlite";
const startOnlyMs = Number(process.env.DOCKET_BLOCK_START_ONLY_MS ?? 0);
const source = readFileSync(blockFile, "utf8");
const uses = (name: string) => new RegExp(`\\b${name}\\b`).test(source);

// What the block makes through any Docket: tracked, so that the postlude stops and closes it.
const made = { workers: [] as { worker: Worker<any>; docket: Docket<any>; started: boolean; stopped: boolean }[], schedulers: [] as { stop(): Promise<void> }[] };
const adapters = new Set<DocketAdapter>();
/** Attempts that failed or were lost, and errors workers survived, on any Docket the block used: each fails the block. */
const troubles: string[] = [];
const watched = new Set<Docket<any>>();
const TROUBLES = new Set(["retried", "dead", "lost", "reclaimed", "error"]);
const closed = new Set<DocketAdapter>();
const proto = Docket.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
for (const method of ["migrate", "enqueue", "enqueueMany", "worker", "scheduler", "close"]) {
  const original = proto[method]!;
  proto[method] = function (this: Docket<any>, ...args: unknown[]) {
    adapters.add(this.adapter);
    if (!watched.has(this)) {
      watched.add(this);
      this.on("*", (event: DocketEvent) => {
        if (!TROUBLES.has(event.type)) return;
        const job = "job" in event ? ` job ${event.job.id} (${event.job.task})` : "";
        const why = "error" in event ? `: ${event.error instanceof Error ? event.error.message : event.error}` : "reason" in event ? `: ${event.reason}` : "";
        troubles.push(`${event.type}${job}${why}`);
      });
    }
    const result = original.apply(this, args);
    if (method === "close") closed.add(this.adapter);
    if (method === "scheduler") made.schedulers.push(result as { stop(): Promise<void> });
    if (method === "worker") {
      const worker = result as Worker<any>;
      const entry = { worker, docket: this, started: false, stopped: false };
      made.workers.push(entry);
      const start = worker.start.bind(worker);
      const stop = worker.stop.bind(worker);
      worker.start = () => ((entry.started = true), start());
      worker.stop = (options) => ((entry.stopped = true), stop(options));
    }
    return result;
  };
}

// The prelude.
const { Kysely: KyselyClass, SqliteDialect, PostgresDialect, MysqlDialect } = await import("kysely");
let adapter: DocketAdapter;
let db: Kysely<any>;
let pool: unknown;
if (target === "sqlite") {
  const { default: Database } = await import("better-sqlite3");
  const { sqliteAdapter } = await import("../../src/adapters/sqlite/index.ts");
  const handle = new Database("docket.db");
  db = new KyselyClass<any>({ dialect: new SqliteDialect({ database: handle }) });
  adapter = sqliteAdapter({ database: handle });
} else if (target === "postgres") {
  const { default: pg } = await import("pg");
  const { postgresAdapter } = await import("../../src/adapters/postgres/index.ts");
  const pgPool = new pg.Pool({ connectionString: process.env.DOCKET_BLOCK_URL });
  db = new KyselyClass<any>({ dialect: new PostgresDialect({ pool: pgPool }) });
  adapter = postgresAdapter({ pool: pgPool });
  pool = pgPool;
} else if (target === "mysql") {
  const { createPool } = (await import("mysql2")).default;
  const { mysqlAdapter } = await import("../../src/adapters/mysql/index.ts");
  const myPool = createPool({ uri: process.env.DOCKET_BLOCK_URL! });
  db = new KyselyClass<any>({ dialect: new MysqlDialect({ pool: myPool }) });
  adapter = mysqlAdapter({ pool: myPool });
} else {
  throw new Error(`DOCKET_BLOCK_TARGET ${target}: sqlite, postgres or mysql`);
}
const docket = new Docket<Record<string, any>>({ adapter });
await docket.migrate();
await db.schema.createTable("orders").ifNotExists().addColumn("id", "integer", (c) => c.primaryKey()).execute();
await db.schema.createTable("shipments").ifNotExists().addColumn("order_id", "integer").execute();

const log = (what: string) => async (first?: unknown) => void console.log(`[prelude] ${what}(${JSON.stringify(first) ?? ""})`);
const globals: Record<string, unknown> = {
  Docket,
  docket,
  adapter,
  db,
  id: 1,
  orderId: 1,
  cents: 1999,
  tenantId: "acme",
  rev: 1,
  sendEmail: log("sendEmail"),
  sendReceipt: log("sendReceipt"),
  signUp: async (d: Docket<any>, email: string) => void (await d.enqueue("email", { to: email })),
  isAdmin: () => true,
  mailer: { send: async () => "message-1", receipt: log("mailer.receipt") },
  payments: { charge: async () => ({ id: "charge-1" }) },
};
if (pool !== undefined) globals.pool = pool;
if (uses("honoApp")) globals.honoApp = new (await import("hono")).Hono();
if (uses("expressApp")) globals.expressApp = (await import("express")).default();
const servers: { close(): unknown }[] = [];
if (uses("Deno")) {
  // Node has no Deno.serve: the block's handler is served by node:http on a free port instead. Defined last,
  // because docket reads `"Deno" in globalThis` (sqliteAdapter({ filename }) opens node:sqlite there).
  const { serveOnNode } = await import("../../src/dashboard/node.ts");
  globals.Deno = {
    serve: (handler: (request: Request) => Promise<Response>) => {
      const served = serveOnNode(handler, 0, "127.0.0.1");
      void served.then(({ server }) => servers.push(server));
      return served;
    },
  };
}
Object.assign(globalThis, globals);

// The block.
const run = import(pathToFileURL(blockFile).href);
if (startOnlyMs > 0) {
  await Promise.race([run, new Promise((resolve) => setTimeout(resolve, startOnlyMs))]);
} else {
  await run;
}

// The postlude.
const deadline = Date.now() + GRACE_MS;
for (;;) {
  const running = made.workers.filter((w) => w.started && !w.stopped);
  let busy = false;
  for (const { worker, docket: d } of running) {
    if (worker.inFlight > 0 || (await d.list({ state: "ready", limit: 1 })).length > 0) busy = true;
  }
  if (!busy || Date.now() > deadline) break;
  await new Promise((resolve) => setTimeout(resolve, 50));
}
for (const w of made.workers) if (w.started) await w.worker.stop();
for (const s of made.schedulers) await s.stop();
for (const s of servers) s.close();
adapters.add(adapter);
for (const a of adapters) if (!closed.has(a)) await a.close();
await db.destroy();
if (troubles.length > 0) {
  console.error(`the block's jobs or workers ran into trouble:\n  ${troubles.join("\n  ")}`);
  process.exit(1);
}
console.log(RUNNER_DONE);
process.exit(0);
