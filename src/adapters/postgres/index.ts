import type { DocketAdapter } from "../../core/adapter.ts";
import { PostgresAdapter, type PostgresAdapterOptions } from "./adapter.ts";

export { PostgresAdapter, type PostgresAdapterOptions };

/** `postgresAdapter({ connectionString: "postgres://…" })` or `postgresAdapter({ pool })`. */
export function postgresAdapter(options: PostgresAdapterOptions): DocketAdapter {
  return new PostgresAdapter(options);
}
