/**
 * Fresh stores for the benchmarks, one per scenario, on each adapter: SQLite
 * files in a temporary directory, or a database of their own on the servers
 * named by DOCKET_PG_URL / DOCKET_MYSQL_URL (local defaults otherwise).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DocketAdapter } from "../src/core/adapter.ts";
import type { InstrumentOptions } from "../src/adapters/kysely/engine.ts";

export type AdapterName = "sqlite" | "postgres" | "mysql";
export const ADAPTERS: readonly AdapterName[] = ["sqlite", "postgres", "mysql"];
export const PG_URL = process.env.DOCKET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const MYSQL_URL = process.env.DOCKET_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/mysql";
const runId = `${process.pid.toString(36)}${Date.now().toString(36)}`;

export interface Database {
  /** A fresh adapter on a fresh, empty store for one scenario. */
  open(scenario: number, options?: OpenOptions): Promise<DocketAdapter>;
  /** Where scenario `scenario`'s store is, for another process to open with `openSpec`. */
  spec(scenario: number): StoreSpec;
  dispose(): Promise<void>;
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** Runs one statement on the PostgreSQL server of PG_URL, on a connection of its own. */
export async function pgAdmin(sql: string): Promise<void> {
  const pg = (await import("pg")).default;
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

/** Options every adapter takes that a benchmark may set. */
export interface OpenOptions {
  instrument?: InstrumentOptions;
}

/** A store's location, serializable to a child process. */
export interface StoreSpec {
  adapter: AdapterName;
  /** SQLite file, or the server URL with its database. */
  location: string;
  prefix: string;
}

/** Opens the store `spec` names (from `Database.spec`), in any process. */
export async function openSpec(spec: StoreSpec, options: OpenOptions = {}): Promise<DocketAdapter> {
  if (spec.adapter === "sqlite") {
    const { sqliteAdapter } = await import("../src/adapters/sqlite/index.ts");
    return sqliteAdapter({ filename: spec.location, tablePrefix: spec.prefix, ...options });
  }
  if (spec.adapter === "postgres") {
    const { postgresAdapter } = await import("../src/adapters/postgres/index.ts");
    return postgresAdapter({ connectionString: spec.location, tablePrefix: spec.prefix, max: 4, ...options });
  }
  const { mysqlAdapter } = await import("../src/adapters/mysql/index.ts");
  return mysqlAdapter({ uri: spec.location, tablePrefix: spec.prefix, connectionLimit: 4, ...options });
}

export async function openDatabase(name: AdapterName): Promise<Database> {
  if (name === "sqlite") {
    const { sqliteAdapter } = await import("../src/adapters/sqlite/index.ts");
    const dir = mkdtempSync(join(tmpdir(), "docket-bench-"));
    const spec = (n: number): StoreSpec => ({ adapter: "sqlite", location: join(dir, `s${n}.db`), prefix: "docket_" });
    return {
      open: async (n, o = {}) => sqliteAdapter({ filename: join(dir, `s${n}.db`), ...o }),
      spec,
      dispose: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const database = `docket_bench_${runId}`;
  if (name === "postgres") {
    const { postgresAdapter } = await import("../src/adapters/postgres/index.ts");
    const admin = pgAdmin;
    await admin(`CREATE DATABASE ${database}`);
    const url = withDatabase(PG_URL, database);
    return {
      open: async (n, o = {}) => postgresAdapter({ connectionString: url, tablePrefix: `s${n}_`, max: 4, ...o }),
      spec: (n) => ({ adapter: "postgres", location: url, prefix: `s${n}_` }),
      dispose: () => admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`),
    };
  }
  const { mysqlAdapter } = await import("../src/adapters/mysql/index.ts");
  const mysql = (await import("mysql2/promise")).default;
  const admin = async (sql: string) => {
    const c = await mysql.createConnection({ uri: MYSQL_URL });
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await admin(`CREATE DATABASE ${database}`);
  const url = withDatabase(MYSQL_URL, database);
  return {
    open: async (n, o = {}) => mysqlAdapter({ uri: url, tablePrefix: `s${n}_`, connectionLimit: 4, ...o }),
    spec: (n) => ({ adapter: "mysql", location: url, prefix: `s${n}_` }),
    dispose: () => admin(`DROP DATABASE IF EXISTS ${database}`),
  };
}
