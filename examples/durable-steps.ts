/**
 * The durable-steps example of docs/workflows.md: a handler charges a card and then
 * emails a receipt, each in `ctx.step`. The first attempt crashes after the
 * charge; the retry gets the stored charge and runs only the email step, so
 * the card is charged once.
 *
 *   npx tsx examples/durable-steps.ts [sqlite|postgres|mysql]
 *
 * SQLite: ./steps.db (deleted first). PostgreSQL and MariaDB: DOCKET_PG_URL /
 * DOCKET_MYSQL_URL, or the local servers' defaults.
 */
import { Docket } from "../src/index.ts";
import { openAdapter } from "./open-database.ts";

type Tasks = { "invoice.send": { orderId: number; cents: number } };

const docket = new Docket<Tasks>({ adapter: await openAdapter(process.argv[2] ?? "sqlite", "steps.db"), retry: { baseMs: 10, jitter: 0 } });
await docket.migrate();

let charges = 0;
const worker = docket.worker({
  logger: null,
  handlers: {
    "invoice.send": async ({ orderId, cents }, ctx) => {
      const charge = await ctx.step("charge", async () => {
        charges++; // the payment provider's call: must not run twice
        return { chargeId: `ch_${orderId}`, cents };
      });
      if (ctx.job.attempt === 1) throw new Error("process crashed after the charge");
      await ctx.step("email", async () => ({ to: "customer@example.com", about: charge.chargeId }));
      return charge.chargeId;
    },
  },
});
await worker.start();
const job = await docket.enqueue("invoice.send", { orderId: 42, cents: 1999 });
const done = await docket.waitFor(job.id, { timeoutMs: 30_000 });
await worker.stop();
console.log(`job ${done.state} after ${done.attempt} attempts, card charged ${charges} time(s)`);
console.log(`steps: ${done.steps.map((s) => `${s.name} ${JSON.stringify(s.result)}`).join("; ")}`);
await docket.close();
