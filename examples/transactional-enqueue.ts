/**
 * The README's transactional-enqueue example: an order row and the job that
 * confirms it are written in the application's own kysely transaction, so
 * both exist or neither does.
 *
 *   npx tsx examples/transactional-enqueue.ts [sqlite|postgres|mysql]
 *
 * SQLite: ./orders.db (deleted first). PostgreSQL and MariaDB: DOCKET_PG_URL /
 * DOCKET_MYSQL_URL, or the local servers' defaults; tables "orders" and docket's.
 */
import { rmSync } from "node:fs";
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect } from "kysely";
import { Docket, type DocketAdapter } from "../src/index.ts";

type Tasks = { "order.confirm": { orderId: number } };
type Db = { orders: { id: number } };

async function open(which: string): Promise<{ db: Kysely<Db>; adapter: DocketAdapter }> {
  if (which === "sqlite") {
    const { default: Database } = await import("better-sqlite3");
    const { sqliteAdapter } = await import("../src/adapters/sqlite/index.ts");
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`orders.db${suffix}`, { force: true });
    // One handle for the application and docket: docket's own writes wait for the application's transactions.
    const handle = new Database("orders.db");
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
await db.schema.createTable("orders").ifNotExists().addColumn("id", "integer", (c) => c.primaryKey()).execute();
await db.deleteFrom("orders").execute();

// Commit: the order and its job appear together.
const job = await db.transaction().execute(async (trx) => {
  await trx.insertInto("orders").values({ id: 1 }).execute();
  return docket.enqueue("order.confirm", { orderId: 1 }, { transaction: trx });
});
const order1 = await db.selectFrom("orders").selectAll().where("id", "=", 1).executeTakeFirst();
console.log(`committed: order 1 ${order1 ? "stored" : "MISSING"}, its job ${(await docket.get(job.id))?.state ?? "MISSING"}`);

// Rollback: neither the order nor its job exists.
let doomed = 0;
try {
  await db.transaction().execute(async (trx) => {
    await trx.insertInto("orders").values({ id: 2 }).execute();
    doomed = (await docket.enqueue("order.confirm", { orderId: 2 }, { transaction: trx })).id;
    throw new Error("payment declined");
  });
} catch (error) {
  const order2 = await db.selectFrom("orders").selectAll().where("id", "=", 2).executeTakeFirst();
  const orphan = await docket.get(doomed);
  console.log(`rolled back (${(error as Error).message}): order 2 ${order2 ? "STORED" : "absent"}, its job ${orphan ? "STORED" : "absent"}`);
}

await docket.close();
await db.destroy();
