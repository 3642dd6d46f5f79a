/**
 * `docket/mysql`: the MySQL and MariaDB adapter (mysql2).
 * @module docket/mysql
 */
import type { DocketAdapter } from "../../core/adapter.ts";
import { openMysql, type MysqlAdapterOptions } from "./mysql-adapter.ts";

export type { MysqlAdapterOptions };
export type { FloorEvent, FloorTuning, InstrumentOptions } from "../kysely/engine.ts";

/** `mysqlAdapter({ uri: "mysql://…" })` or `mysqlAdapter({ pool })` (mysql2's callback pool). */
export function mysqlAdapter(options: MysqlAdapterOptions): DocketAdapter {
  return openMysql(options);
}
