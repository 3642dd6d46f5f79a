/**
 * `docket/postgres`: the PostgreSQL adapter (pg).
 * @module docket/postgres
 */
import type { DocketAdapter } from "../../core/adapter.ts";
import { openPostgres, type PostgresAdapterOptions } from "./postgres-adapter.ts";

export type { PostgresAdapterOptions };
export type { FloorEvent, FloorTuning, InstrumentOptions } from "../kysely/engine.ts";

/** `postgresAdapter({ connectionString: "postgres://…" })` or `postgresAdapter({ pool })`. */
export function postgresAdapter(options: PostgresAdapterOptions): DocketAdapter {
  return openPostgres(options);
}
