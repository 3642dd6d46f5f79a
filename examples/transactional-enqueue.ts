/**
 * The transactional-enqueue example of docs/jobs.md: an order row and the job that
 * confirms it are written in the application's own kysely transaction, so
 * both exist or neither does.
 *
 *   npx tsx examples/transactional-enqueue.ts [sqlite|postgres|mysql]
 *
 * SQLite: ./orders.db (deleted first). PostgreSQL and MariaDB: DOCKET_PG_URL /
 * DOCKET_MYSQL_URL, or the local servers' defaults; tables "orders" and docket's.
 */
import { Docket } from "../src/index.ts";
import { openDatabase } from "./open-database.ts";

type Tasks = { "order.confirm": { orderId: number } };
type Db = { orders: { id: number } };

const { db, adapter } = await openDatabase<Db>(process.argv[2] ?? "sqlite", "orders.db");
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
