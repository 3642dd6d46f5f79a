import { describeExample } from "./run-example.ts";

await describeExample("examples/handler-transaction.ts", "prints that the shipped order has its row and the cancelled one's transaction rolled back", [
  "order 1: job succeeded",
  "order 2: lease lost, its transaction rolled back",
  "shipments: [1]; order 2's job cancelled",
]);
