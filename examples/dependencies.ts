/**
 * The dependencies example of docs/workflows.md: an order pipeline stored as one graph in
 * one enqueueMany — charge the card and render the PDF (both after the order
 * is validated), then send the invoice once both are done. The invoice job
 * reads its parents' results through ctx.parents(). A second graph's charge
 * fails for good: its invoice is cancelled, the reason naming the charge.
 *
 *   npx tsx examples/dependencies.ts [sqlite|postgres|mysql]
 *
 * SQLite: ./deps.db (deleted first). PostgreSQL and MariaDB: DOCKET_PG_URL /
 * DOCKET_MYSQL_URL, or the local servers' defaults.
 */
import { Docket } from "../src/index.ts";
import { openAdapter } from "./open-database.ts";

type Tasks = {
  "order.validate": { orderId: number };
  "card.charge": { orderId: number; cents: number };
  "pdf.render": { orderId: number };
  "invoice.send": { orderId: number };
};

const adapter = await openAdapter(process.argv[2] ?? "sqlite", "deps.db");
const docket = new Docket<Tasks>({ adapter, retry: { maxAttempts: 1 } });
await docket.migrate();

const ran: string[] = [];
const worker = docket.worker({
  logger: null,
  handlers: {
    "order.validate": ({ orderId }) => void ran.push(`validate ${orderId}`),
    "card.charge": ({ orderId, cents }) => {
      ran.push(`charge ${orderId}`);
      if (cents <= 0) throw new Error("card declined");
      return { chargeId: `ch_${orderId}` };
    },
    "pdf.render": ({ orderId }) => {
      ran.push(`pdf ${orderId}`);
      return { url: `/invoices/${orderId}.pdf` };
    },
    "invoice.send": async ({ orderId }, ctx) => {
      // Parents come in id order: pick them by task.
      const parents = await ctx.parents();
      const charge = parents.find((p) => p.task === "card.charge")?.result as Record<string, string> | undefined;
      const pdf = parents.find((p) => p.task === "pdf.render")?.result as Record<string, string> | undefined;
      ran.push(`invoice ${orderId}`);
      return `sent ${pdf!.url} for ${charge!.chargeId}`;
    },
  },
});
await worker.start();

/** One order's pipeline as one graph: stored atomically, or not at all. */
const pipeline = (orderId: number, cents: number) =>
  docket.enqueueMany([
    { task: "order.validate", payload: { orderId }, ref: "validate" },
    { task: "card.charge", payload: { orderId, cents }, ref: "charge", options: { after: [{ ref: "validate" }] } },
    { task: "pdf.render", payload: { orderId }, ref: "pdf", options: { after: [{ ref: "validate" }] } },
    { task: "invoice.send", payload: { orderId }, options: { after: [{ ref: "charge" }, { ref: "pdf" }] } },
  ]);

const good = await pipeline(1, 1999);
console.log(`stored: ${good.map((j) => `${j.task} ${j.state}`).join(", ")}`);
const sent = await docket.waitFor(good[3]!.id, { timeoutMs: 30_000 });
console.log(`invoice ${sent.state}: ${JSON.stringify(sent.result)}`);

const bad = await pipeline(2, 0);
const cancelled = await docket.waitFor(bad[3]!.id, { timeoutMs: 30_000 });
console.log(`invoice of order 2 ${cancelled.state}: ${cancelled.lastError?.replace(/\d+/, "<charge>")}`);
await worker.stop();
const at = (step: string) => ran.indexOf(`${step} 1`);
const ordered = at("validate") < Math.min(at("charge"), at("pdf")) && Math.max(at("charge"), at("pdf")) < at("invoice");
console.log(`order 1 ran validate, then charge and pdf, then invoice: ${ordered}`);
await docket.close();
