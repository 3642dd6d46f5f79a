import type { DocketAdapter } from "../core/adapter.ts";
import { UsageError } from "./usage.ts";

/**
 * Opens the adapter a `--url` names: `postgres://…` (or `postgresql://`),
 * `mysql://…` (or `mariadb://`), `sqlite:path` (or `sqlite://path`). Only
 * the named adapter's module (and its driver) is imported.
 */
export async function openUrl(url: string, tablePrefix: string | undefined): Promise<DocketAdapter> {
  const prefix = tablePrefix === undefined ? {} : { tablePrefix };
  if (/^postgres(ql)?:\/\//.test(url)) {
    const { postgresAdapter } = await import("../adapters/postgres/index.ts");
    return postgresAdapter({ connectionString: url, max: 4, ...prefix });
  }
  if (/^(mysql|mariadb):\/\//.test(url)) {
    const { mysqlAdapter } = await import("../adapters/mysql/index.ts");
    return mysqlAdapter({ uri: url.replace(/^mariadb:/, "mysql:"), connectionLimit: 4, ...prefix });
  }
  const sqlite = /^sqlite:(\/\/)?(.+)$/.exec(url);
  if (sqlite) {
    const { sqliteAdapter } = await import("../adapters/sqlite/index.ts");
    return sqliteAdapter({ filename: sqlite[2]!, ...prefix });
  }
  throw new UsageError(`--url must start with postgres://, mysql://, mariadb:// or sqlite:, got ${JSON.stringify(url)}`);
}
