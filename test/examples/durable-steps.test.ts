import { describeExample } from "./run-example.ts";

await describeExample("examples/durable-steps.ts", "prints that the retried job charged the card once and recorded both steps", [
  "job succeeded after 2 attempts, card charged 1 time(s)",
  'steps: charge {"chargeId":"ch_42","cents":1999}; email {"to":"customer@example.com","about":"ch_42"}',
]);
