import { describeExample } from "./run-example.ts";

await describeExample("examples/dependencies.ts", "prints the graph stored waiting, the invoice sent after both parents, and the failed order's invoice cancelled", [
  "stored: order.validate ready, card.charge waiting, pdf.render waiting, invoice.send waiting",
  'invoice succeeded: "sent /invoices/1.pdf for ch_1"',
  "invoice of order 2 cancelled: cancelled: parent job <charge> ended dead",
  "order 1 ran validate, then charge and pdf, then invoice: true",
]);
