import { join } from "node:path";
import pg from "pg";
import { nodeSqliteDatabase, sqliteAdapter } from "../../src/adapters/sqlite/index.ts";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import type { DocketAdapter } from "../../src/core/adapter.ts";
import type { ConnectOptions, TestStore } from "../../src/testing/harness.ts";
import { DatabaseSync } from "./node-sqlite.ts";
import { openTarget as openNodeTarget, PG_URL, REQUIRE_ALL, type DisposableTarget, type TargetName } from "../support/targets.ts";

/**
 * Test targets for Deno, with the Node targets' semantics (test/support/targets.ts):
 * DOCKET_PG_URL / DOCKET_MYSQL_URL or the local defaults, a database per run,
 * a table prefix per store, a loud banner when a server is unreachable, and
 * a failure instead under DOCKET_REQUIRE_ALL_ADAPTERS=1.
 *
 * - MySQL is the Node target itself (with its container fallback and its
 *   banner): npm:mysql2 runs unchanged under Deno.
 * - SQLite differs in its driver only: better-sqlite3 does not load under
 *   Deno, so every connection is its own `node:sqlite` DatabaseSync on the
 *   store's WAL file, through `nodeSqliteDatabase()`.
 * - PostgreSQL is the Node target (without its container fallback, which
 *   under Deno is untried) plus a wait before the final
 *   `DROP DATABASE … WITH (FORCE)`: pg's `Pool.end()` resolves before its
 *   clients have disconnected, so FORCE can terminate a backend whose client
 *   is still open, and that client then throws "terminating connection due
 *   to administrator command" outside any test (seen in ~1 run out of 5).
 */
export type { DisposableTarget, TargetName };

let stores = 0;
const runId = `${Deno.pid.toString(36)}${Date.now().toString(36)}`;
function nextPrefix(): string {
  return `c${(stores++).toString(36)}_`;
}

export async function sqliteTarget(): Promise<DisposableTarget> {
  const dir = await Deno.makeTempDir({ prefix: "docket-deno-test-" });
  return {
    name: "sqlite",
    async open(): Promise<TestStore> {
      const tablePrefix = nextPrefix();
      const filename = join(dir, `${tablePrefix}.db`);
      const admin = new DatabaseSync(filename);
      admin.exec("PRAGMA journal_mode = WAL");
      const connections: DatabaseSync[] = [];
      return {
        tablePrefix,
        connect: async (options?: ConnectOptions): Promise<DocketAdapter> => {
          const db = new DatabaseSync(filename);
          connections.push(db);
          return sqliteAdapter({ database: nodeSqliteDatabase(db), tablePrefix, ...options });
        },
        execute: async (sql) => void admin.exec(sql.replaceAll("{jobs}", `${tablePrefix}jobs`)),
        // runCase closes every adapter first; adapters do not own a database
        // they were given, so the store closes them.
        close: async () => {
          for (const db of [...connections, admin]) if (db.isOpen) db.close();
        },
      };
    },
    dispose: () => Deno.remove(dir, { recursive: true }),
  };
}

export async function postgresTarget(): Promise<DisposableTarget> {
  const database = `docket_test_${runId}`;
  const root = new pg.Client({ connectionString: PG_URL });
  await root.connect();
  await root.query(`CREATE DATABASE ${database}`);
  await root.end();
  const u = new URL(PG_URL);
  u.pathname = `/${database}`;
  const url = u.toString();
  const admin = new pg.Pool({ connectionString: url, max: 2 });
  return {
    name: "postgres",
    async open(): Promise<TestStore> {
      const tablePrefix = nextPrefix();
      return {
        tablePrefix,
        connect: async (options?: ConnectOptions) => postgresAdapter({ connectionString: url, tablePrefix, max: 4, ...options }),
        execute: async (sql) => void (await admin.query(sql.replaceAll("{jobs}", `${tablePrefix}jobs`))),
        close: async () => undefined,
      };
    },
    async dispose() {
      await admin.end();
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      try {
        for (let i = 0; i < 250; i++) {
          const { rows } = await c.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1", [database]);
          if (rows[0].n === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await c.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

const FACTORIES: Record<"sqlite" | "postgres", () => Promise<DisposableTarget>> = {
  sqlite: sqliteTarget,
  postgres: postgresTarget,
};

/**
 * The target, or null when it is unavailable and not required; prints the
 * same loud banner as the Node targets when it skips.
 */
export async function openTarget(name: TargetName): Promise<DisposableTarget | null> {
  if (name === "mysql") return openNodeTarget(name);
  try {
    return await FACTORIES[name]();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    if (REQUIRE_ALL) throw new Error(`DOCKET_REQUIRE_ALL_ADAPTERS=1 but the ${name} target is unavailable: ${reason}`, { cause: error });
    const bar = "!".repeat(78);
    const hint = name === "sqlite" ? "node:sqlite could not open a database." : "Set DOCKET_PG_URL or start the server.";
    console.warn(`\n${bar}\n!! SKIPPING every ${name} test: ${reason}\n!! ${hint}\n${bar}\n`);
    return null;
  }
}
