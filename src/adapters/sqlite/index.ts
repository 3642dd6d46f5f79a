import type { DocketAdapter } from "../../core/adapter.ts";
import { SqliteAdapter, type SqliteAdapterOptions } from "./adapter.ts";

export { SqliteAdapter, type SqliteAdapterOptions };
export { nodeSqliteDatabase, type NodeSqliteDatabaseSync, type NodeSqliteStatementSync } from "./node-sqlite.ts";

/** The embedded default: `sqliteAdapter({ filename: "jobs.db" })`. */
export function sqliteAdapter(options: SqliteAdapterOptions): DocketAdapter {
  return new SqliteAdapter(options);
}
