/**
 * `docket/sqlite`: the SQLite adapter (better-sqlite3, or `node:sqlite`
 * through `nodeSqliteDatabase`).
 * @module docket/sqlite
 */
import type { DocketAdapter } from "../../core/adapter.ts";
import { openSqlite, type SqliteAdapterOptions } from "./sqlite-adapter.ts";

export type { SqliteAdapterOptions };
export type { FloorEvent, FloorTuning, InstrumentOptions } from "../kysely/engine.ts";
export { nodeSqliteDatabase, type NodeSqliteDatabaseSync, type NodeSqliteStatementSync } from "./node-sqlite.ts";

/** The embedded default: `sqliteAdapter({ filename: "jobs.db" })`. */
export function sqliteAdapter(options: SqliteAdapterOptions): DocketAdapter {
  return openSqlite(options);
}
