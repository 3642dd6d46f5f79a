/**
 * Child process of the connection-loss tests: runs one worker through the
 * public API (postgresAdapter({ connectionString }) or mysqlAdapter({ uri })) until the
 * parent writes "stop" on stdin. Prints one JSON line per handler run
 * ({"ran": id}) and, at the end, {"report": {...}}. A crash shows as a
 * non-zero exit without the report. Usage: chaos-worker.ts <postgres|mysql> <url>
 */
import { Docket } from "../../src/client/docket.ts";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import { mysqlAdapter } from "../../src/adapters/mysql/index.ts";

const [kind, url] = process.argv.slice(2) as [string, string];
const adapter = kind === "mysql" ? mysqlAdapter({ uri: url, connectionLimit: 4 }) : postgresAdapter({ connectionString: url, max: 4 });
const docket = new Docket({ adapter });
const counts = { errors: 0, connectionErrors: 0, lost: 0, succeeded: 0 };
const worker = docket.worker({
  concurrency: 8,
  pollMs: 20,
  leaseMs: 15_000,
  heartbeatMs: 500,
  reclaimMs: 1_000,
  logger: null,
  handlers: {
    work: async (payload: unknown) => {
      await new Promise((r) => setTimeout(r, 5));
      process.stdout.write(`${JSON.stringify({ ran: payload })}\n`);
    },
  },
  onEvent: (e) => {
    if (e.type === "error") {
      counts.errors++;
      if (e.operation === "connection") counts.connectionErrors++;
    } else if (e.type === "lost") counts.lost++;
    else if (e.type === "succeeded") counts.succeeded++;
  },
});
await worker.start();
process.stdin.setEncoding("utf8");
process.stdin.on("data", async (chunk) => {
  if (!String(chunk).includes("stop")) return;
  await worker.stop();
  await docket.close();
  process.stdout.write(`${JSON.stringify({ report: counts })}\n`);
  process.exit(0);
});
