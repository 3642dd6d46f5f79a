/**
 * Child process for the PgBouncer tests: another process of the same app,
 * which enqueues one job with default options and prints its id as JSON.
 * Usage: enqueue-child.ts <postgres-url> <prefix>
 */
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import { Docket } from "../../src/index.ts";

const [url, tablePrefix] = process.argv.slice(2) as [string, string];
const adapter = postgresAdapter({ connectionString: url, tablePrefix, logger: null });
try {
  const job = await new Docket({ adapter }).enqueue("t", { from: "child" });
  console.log(JSON.stringify({ id: job.id }));
} finally {
  await adapter.close();
}
