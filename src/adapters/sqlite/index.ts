import type { DocketAdapter } from "../../core/adapter.ts";
import { SqliteAdapter, type SqliteAdapterOptions } from "./adapter.ts";

export { SqliteAdapter, type SqliteAdapterOptions };

/** The embedded default: `sqliteAdapter({ filename: "jobs.db" })`. */
export function sqliteAdapter(options: SqliteAdapterOptions): DocketAdapter {
  return new SqliteAdapter(options);
}
