/**
 * Fresh stores for the benchmarks, one per scenario, on each adapter: SQLite
 * files in a temporary directory, or a database of their own on the servers
 * named by DOCKET_PG_URL / DOCKET_MYSQL_URL (local defaults otherwise).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DocketAdapter } from "../src/core/adapter.ts";

export type AdapterName = "sqlite" | "postgres" | "mysql";
export const ADAPTERS: readonly AdapterName[] = ["sqlite", "postgres", "mysql"];
const PG_URL = process.env.DOCKET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const MYSQL_URL = process.env.DOCKET_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/mysql";
const runId = `${process.pid.toString(36)}${Date.now().toString(36)}`;

export interface Database {
  /** A fresh adapter on a fresh, empty store for one scenario. */
  open(scenario: number): Promise<DocketAdapter>;
  dispose(): Promise<void>;
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export async function openDatabase(name: AdapterName): Promise<Database> {
  if (name === "sqlite") {
    const { sqliteAdapter } = await import("../src/adapters/sqlite/index.ts");
    const dir = mkdtempSync(join(tmpdir(), "docket-bench-"));
    return {
      open: async (n) => sqliteAdapter({ filename: join(dir, `s${n}.db`) }),
      dispose: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const database = `docket_bench_${runId}`;
  if (name === "postgres") {
    const { postgresAdapter } = await import("../src/adapters/postgres/index.ts");
    const pg = (await import("pg")).default;
    const admin = async (sql: string) => {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      try {
        await c.query(sql);
      } finally {
        await c.end();
      }
    };
    await admin(`CREATE DATABASE ${database}`);
    const url = withDatabase(PG_URL, database);
    return {
      open: async (n) => postgresAdapter({ connectionString: url, tablePrefix: `s${n}_`, max: 4 }),
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
    open: async (n) => mysqlAdapter({ uri: url, tablePrefix: `s${n}_`, connectionLimit: 4 }),
    dispose: () => admin(`DROP DATABASE IF EXISTS ${database}`),
  };
}
