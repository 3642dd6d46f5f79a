/**
 * Child process for the cross-process tests: another process of the same
 * app. Enqueues `count` jobs of task "t" (payload `{ i, from: "child" }`),
 * each after a random pause of up to `gapMs`, and prints one JSON line per
 * job once its enqueue has returned: `{ i, id, at }` (`at`: Date.now()).
 * Usage: enqueue-child.ts <postgres-or-mysql-url> <prefix> [count=1] [gapMs=0]
 */
import { mysqlAdapter } from "../../src/adapters/mysql/index.ts";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import { Docket } from "../../src/index.ts";

const [url, tablePrefix, count = "1", gapMs = "0"] = process.argv.slice(2) as [string, string, string?, string?];
const adapter = url.startsWith("mysql:") ? mysqlAdapter({ uri: url, tablePrefix }) : postgresAdapter({ connectionString: url, tablePrefix, logger: null });
try {
  const docket = new Docket({ adapter });
  for (let i = 0; i < Number(count); i++) {
    if (Number(gapMs) > 0) await new Promise((r) => setTimeout(r, Math.random() * Number(gapMs)));
    const job = await docket.enqueue("t", { i, from: "child" });
    console.log(JSON.stringify({ i, id: job.id, at: Date.now() }));
  }
} finally {
  await adapter.close();
}
