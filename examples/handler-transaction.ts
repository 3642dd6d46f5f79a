/**
 * The README's ctx.transaction example: a handler writes the order's
 * shipment row and completes its job in ONE transaction. An attempt whose
 * lease was lost (here: the job was cancelled while the handler waited) has
 * its transaction rolled back, so the row exists once per shipped order.
 *
 *   npx tsx examples/handler-transaction.ts [sqlite|postgres|mysql]
 *
 * SQLite: ./shipments.db (deleted first). PostgreSQL and MariaDB: DOCKET_PG_URL
 * / DOCKET_MYSQL_URL, or the local servers' defaults; tables "shipments" and docket's.
 */
import { rmSync } from "node:fs";
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect, type Transaction } from "kysely";
import { Docket, type DocketAdapter } from "../src/index.ts";

type Tasks = { "order.ship": { orderId: number; slow?: boolean } };
type Db = { shipments: { order_id: number } };

async function open(which: string): Promise<{ db: Kysely<Db>; adapter: DocketAdapter }> {
  if (which === "sqlite") {
    const { default: Database } = await import("better-sqlite3");
    const { sqliteAdapter } = await import("../src/adapters/sqlite/index.ts");
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`shipments.db${suffix}`, { force: true });
    const handle = new Database("shipments.db");
    return { db: new Kysely<Db>({ dialect: new SqliteDialect({ database: handle }) }), adapter: sqliteAdapter({ database: handle }) };
  }
  if (which === "postgres") {
    const { default: pg } = await import("pg");
    const { postgresAdapter } = await import("../src/adapters/postgres/index.ts");
    const pool = new pg.Pool({ connectionString: process.env.DOCKET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres" });
    return { db: new Kysely<Db>({ dialect: new PostgresDialect({ pool }) }), adapter: postgresAdapter({ pool }) };
  }
  const { createPool } = (await import("mysql2")).default;
  const { mysqlAdapter } = await import("../src/adapters/mysql/index.ts");
  const pool = createPool({ uri: process.env.DOCKET_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test" });
  return { db: new Kysely<Db>({ dialect: new MysqlDialect({ pool }) }), adapter: mysqlAdapter({ pool }) };
}

const { db, adapter } = await open(process.argv[2] ?? "sqlite");
const docket = new Docket<Tasks>({ adapter });
await docket.migrate();
await db.schema.createTable("shipments").ifNotExists().addColumn("order_id", "integer").execute();
await db.deleteFrom("shipments").execute();

let cancelled: () => void = () => undefined;
const wasCancelled = new Promise<void>((r) => (cancelled = r));
const worker = docket.worker({
  logger: null,
  handlers: {
    "order.ship": async ({ orderId, slow }, ctx) => {
      if (slow) await wasCancelled; // meanwhile the job is cancelled: this attempt no longer holds its lease
      return ctx.transaction(async (trx: Transaction<Db>) => {
        await trx.insertInto("shipments").values({ order_id: orderId }).execute();
        return { shipped: orderId };
      });
    },
  },
  onEvent: (e) => {
    if (e.type === "lost") console.log(`order ${(e.job.payload as { orderId: number }).orderId}: lease lost, its transaction rolled back`);
  },
});
await worker.start();
const shipped = await docket.enqueue("order.ship", { orderId: 1 });
console.log(`order 1: job ${(await docket.waitFor(shipped.id, { timeoutMs: 30_000 })).state}`);
const doomed = await docket.enqueue("order.ship", { orderId: 2, slow: true });
while ((await docket.get(doomed.id))?.state !== "running") await new Promise((r) => setTimeout(r, 10));
await docket.cancel(doomed.id);
cancelled();
await worker.stop();
const rows = await db.selectFrom("shipments").select("order_id").orderBy("order_id").execute();
console.log(`shipments: ${JSON.stringify(rows.map((r) => r.order_id))}; order 2's job ${(await docket.get(doomed.id))?.state}`);
await docket.close();
await db.destroy();
