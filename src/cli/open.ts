import { existsSync } from "node:fs";
import type { DocketAdapter } from "../core/adapter.ts";
import { redactUrl } from "./redact.ts";
import { UsageError } from "./usage.ts";

/** `--url sqlite:path` names a file that does not exist, and the command may not create it: printed with exit code 3. */
export class NoSqliteDatabase extends Error {
  override readonly name = "NoSqliteDatabase";
  constructor(readonly path: string) {
    super(`no SQLite database at ${path}; run docket migrate --url sqlite:${path} to create one`);
  }
}

/**
 * Opens the adapter a `--url` names: `postgres://…` (or `postgresql://`),
 * `mysql://…` (or `mariadb://`), `sqlite:path` (or `sqlite://path`). Only
 * the named adapter's module (and its driver) is imported. A SQLite file is
 * created only when `create` is true (`docket migrate`); otherwise a missing
 * file throws NoSqliteDatabase and none is created. A malformed URL is a
 * UsageError whose message shows the URL without its credentials.
 */
export async function openUrl(url: string, tablePrefix: string | undefined, options: { create?: boolean } = {}): Promise<DocketAdapter> {
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
    const filename = sqlite[2]!;
    const create = options.create ?? true;
    if (!create && filename !== ":memory:" && !existsSync(filename)) throw new NoSqliteDatabase(filename);
    const { sqliteAdapter } = await import("../adapters/sqlite/index.ts");
    return sqliteAdapter({ filename, ...prefix, ...(create ? {} : { fileMustExist: true }) });
  }
  throw new UsageError(`--url must start with postgres://, mysql://, mariadb:// or sqlite:, got ${redactUrl(url)}`);
}
