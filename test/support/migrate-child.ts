/**
 * Child process for the two-process migration test: migrates one store and
 * prints the result as JSON. Usage: migrate-child.ts <sqlite|postgres|mysql> <url-or-file> <prefix>
 */
import type { DocketAdapter } from "../../src/core/adapter.ts";

const [kind, location, tablePrefix] = process.argv.slice(2) as [string, string, string];
let adapter: DocketAdapter;
if (kind === "sqlite") adapter = (await import("../../src/adapters/sqlite/index.ts")).sqliteAdapter({ filename: location, tablePrefix });
else if (kind === "postgres") adapter = (await import("../../src/adapters/postgres/index.ts")).postgresAdapter({ connectionString: location, tablePrefix });
else adapter = (await import("../../src/adapters/mysql/index.ts")).mysqlAdapter({ uri: location, tablePrefix });
try {
  console.log(JSON.stringify(await adapter.migrate()));
} finally {
  await adapter.close();
}
