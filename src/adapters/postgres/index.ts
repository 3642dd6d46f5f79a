import type { DocketAdapter } from "../../core/adapter.ts";
import { openPostgres, type PostgresAdapterOptions } from "./postgres-adapter.ts";

export type { PostgresAdapterOptions };

/** `postgresAdapter({ connectionString: "postgres://…" })` or `postgresAdapter({ pool })`. */
export function postgresAdapter(options: PostgresAdapterOptions): DocketAdapter {
  return openPostgres(options);
}
