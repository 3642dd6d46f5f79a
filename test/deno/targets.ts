import { join } from "node:path";
import { nodeSqliteDatabase, sqliteAdapter } from "../../src/adapters/sqlite/index.ts";
import type { DocketAdapter } from "../../src/core/adapter.ts";
import type { KyselyConnectOptions as ConnectOptions, KyselyTestStore } from "../../src/testing/kysely/harness.ts";
import { DatabaseSync } from "./node-sqlite.ts";
import { openTarget as openNodeTarget, REQUIRE_ALL, type ConformanceTargetName, type DisposableTarget, type TargetName } from "../support/targets.ts";

/**
 * Test targets for Deno, with the Node targets' semantics (test/support/targets.ts):
 * DOCKET_PG_URL / DOCKET_MYSQL_URL or the local defaults, a database per run,
 * a table prefix per store, a loud banner when a server is unreachable, and
 * a failure instead under DOCKET_REQUIRE_ALL_ADAPTERS=1.
 *
 * - PostgreSQL and MySQL are the Node targets themselves (with their
 *   container fallback and banner): npm:pg and npm:mysql2 run unchanged.
 * - SQLite differs in its driver only: better-sqlite3 does not load under
 *   Deno, so every connection is its own `node:sqlite` DatabaseSync on the
 *   store's WAL file, through `nodeSqliteDatabase()`.
 */
export type { ConformanceTargetName, DisposableTarget, TargetName };

let stores = 0;
function nextPrefix(): string {
  return `c${(stores++).toString(36)}_`;
}

export async function sqliteTarget(): Promise<DisposableTarget> {
  const dir = await Deno.makeTempDir({ prefix: "docket-deno-test-" });
  return {
    name: "sqlite",
    async open(): Promise<KyselyTestStore> {
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
        async application() {
          const { Kysely, SqliteDialect } = await import("kysely");
          const raw = new DatabaseSync(filename);
          connections.push(raw);
          raw.exec("PRAGMA busy_timeout = 5000");
          const handle = nodeSqliteDatabase(raw);
          // deno-lint-ignore no-explicit-any
          const db = new Kysely<any>({ dialect: new SqliteDialect({ database: handle }) });
          const adapter = sqliteAdapter({ database: handle, tablePrefix });
          const handles: [string, object][] = [["a node:sqlite database", raw], ["its handle for kysely", handle]];
          const outsideTransaction = async () => ({ handles, release: async () => undefined });
          return { db, adapter, outsideTransaction, close: async () => (await adapter.close(), await db.destroy()) };
        },
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

const FACTORIES: Record<"sqlite", () => Promise<DisposableTarget>> = {
  sqlite: sqliteTarget,
};

/**
 * The target, or null when it is unavailable and not required; prints the
 * same loud banner as the Node targets when it skips.
 */
export async function openTarget(name: ConformanceTargetName): Promise<DisposableTarget | null> {
  // The server targets and the memory one are the Node ones: npm:pg and npm:mysql2 run unchanged under Deno.
  if (name !== "sqlite") return openNodeTarget(name);
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
