/**
 * The ctx.transaction example of docs/workflows.md: a handler writes the order's
 * shipment row and completes its job in ONE transaction. An attempt whose
 * lease was lost (here: the job was cancelled while the handler waited) has
 * its transaction rolled back, so the row exists once per shipped order.
 *
 *   npx tsx examples/handler-transaction.ts [sqlite|postgres|mysql]
 *
 * SQLite: ./shipments.db (deleted first). PostgreSQL and MariaDB: DOCKET_PG_URL
 * / DOCKET_MYSQL_URL, or the local servers' defaults; tables "shipments" and docket's.
 */
import type { Transaction } from "kysely";
import { Docket } from "../src/index.ts";
import { openDatabase } from "./open-database.ts";

type Tasks = { "order.ship": { orderId: number; slow?: boolean } };
type Db = { shipments: { order_id: number } };

const { db, adapter } = await openDatabase<Db>(process.argv[2] ?? "sqlite", "shipments.db");
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
