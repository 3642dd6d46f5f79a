import type { DocketAdapter } from "../../core/adapter.ts";
import { MysqlAdapter, type MysqlAdapterOptions } from "./adapter.ts";

export { MysqlAdapter, type MysqlAdapterOptions };

/** `mysqlAdapter({ uri: "mysql://…" })` or `mysqlAdapter({ pool })` (mysql2's callback pool). */
export function mysqlAdapter(options: MysqlAdapterOptions): DocketAdapter {
  return new MysqlAdapter(options);
}
