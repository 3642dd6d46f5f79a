import { describeExample } from "./run-example.ts";

await describeExample("examples/transactional-enqueue.ts", "prints that the committed order has its job and the rolled-back one has neither", [
  "committed: order 1 stored, its job ready",
  "rolled back (payment declined): order 2 absent, its job absent",
]);
