import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AdapterTarget, TestStore } from "../../src/testing/harness.ts";
import type { KyselyConnectOptions as ConnectOptions, KyselyTestStore } from "../../src/testing/kysely/harness.ts";
import type { DocketAdapter } from "../../src/core/adapter.ts";

/**
 * Test targets for Node, one per adapter. Connection URLs come from
 * DOCKET_PG_URL / DOCKET_MYSQL_URL, else the local defaults; when a server
 * does not answer, the target is skipped with a loud message, unless
 * DOCKET_REQUIRE_ALL_ADAPTERS=1, which turns a missing server into a failure.
 * Each test run creates its own database, and each store its own table prefix.
 */
export type TargetName = "sqlite" | "postgres" | "mysql";
/** Every conformance target: the SQL adapters and the in-process one. */
export type ConformanceTargetName = TargetName | "memory";

/** A target and what disposing of it takes; by default a SQL (kysely) target, whose stores take `instrument` and offer `application()`. */
export interface DisposableTarget<S extends TestStore = KyselyTestStore> extends AdapterTarget<S> {
  dispose(): Promise<void>;
}

export const PG_URL = process.env.DOCKET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
export const MYSQL_URL = process.env.DOCKET_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/mysql";
export const REQUIRE_ALL = process.env.DOCKET_REQUIRE_ALL_ADAPTERS === "1";

let stores = 0;
const runId = `${process.pid.toString(36)}${Date.now().toString(36)}`;
function nextPrefix(): string {
  return `c${(stores++).toString(36)}_`;
}

/**
 * Drops a test database. pg's Pool.end() resolves before its sockets close,
 * and FORCE would kill a closing connection, which then raises an unhandled
 * error in this process: wait (up to 5 s) for its connections to go first.
 */
export async function dropPgDatabase(rootUrl: string, database: string): Promise<void> {
  const pg = (await import("pg")).default;
  const c = new pg.Client({ connectionString: rootUrl });
  await c.connect();
  try {
    for (let i = 0; i < 100; i++) {
      const r = await c.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1", [database]);
      if (r.rows[0].n === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await c.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  } finally {
    await c.end();
  }
}

/** The URL with its database path replaced. */
function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export async function sqliteTarget(): Promise<DisposableTarget> {
  const { sqliteAdapter } = await import("../../src/adapters/sqlite/index.ts");
  const { default: Database } = await import("better-sqlite3");
  const dir = mkdtempSync(join(tmpdir(), "docket-test-"));
  return {
    name: "sqlite",
    async open(): Promise<KyselyTestStore> {
      const tablePrefix = nextPrefix();
      const filename = join(dir, `${tablePrefix}.db`);
      const admin = new Database(filename);
      admin.pragma("journal_mode = WAL");
      return {
        tablePrefix,
        location: filename,
        connect: async (o?: ConnectOptions): Promise<DocketAdapter> => sqliteAdapter({ filename, tablePrefix, ...o }),
        execute: async (sql) => void admin.exec(sql.replaceAll("{jobs}", `${tablePrefix}jobs`)),
        close: async () => void admin.close(),
        async application() {
          const { Kysely, SqliteDialect } = await import("kysely");
          const handle = new Database(filename);
          handle.pragma("busy_timeout = 5000");
          const db = new Kysely<any>({ dialect: new SqliteDialect({ database: handle }) });
          const adapter = sqliteAdapter({ database: handle, tablePrefix });
          const outsideTransaction = async () => ({ handles: [["a better-sqlite3 handle", handle]] as [string, object][], release: async () => undefined });
          return { db, adapter, outsideTransaction, close: async () => (await adapter.close(), await db.destroy()) };
        },
      };
    },
    dispose: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

export async function postgresTarget(PG_URL: string): Promise<DisposableTarget> {
  const { postgresAdapter } = await import("../../src/adapters/postgres/index.ts");
  const pg = (await import("pg")).default;
  const database = `docket_test_${runId}`;
  const root = new pg.Client({ connectionString: PG_URL });
  await root.connect();
  await root.query(`CREATE DATABASE ${database}`);
  await root.end();
  const url = withDatabase(PG_URL, database);
  const admin = new pg.Pool({ connectionString: url, max: 2 });
  return {
    name: "postgres",
    async open(): Promise<KyselyTestStore> {
      const tablePrefix = nextPrefix();
      return {
        tablePrefix,
        location: url,
        connect: async (o?: ConnectOptions) => postgresAdapter({ connectionString: url, tablePrefix, max: 4, ...o }),
        execute: async (sql) => void (await admin.query(sql.replaceAll("{jobs}", `${tablePrefix}jobs`))),
        close: async () => undefined,
        async application() {
          const { Kysely, PostgresDialect } = await import("kysely");
          const pool = new pg.Pool({ connectionString: url, max: 3 });
          const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
          const adapter = postgresAdapter({ connectionString: url, tablePrefix, max: 4 });
          const outsideTransaction = async () => {
            const idle = await pool.connect();
            const committed = await pool.connect();
            await committed.query("BEGIN");
            await committed.query("COMMIT");
            const handles: [string, object][] = [["a pg.Pool", pool], ["a pg client before BEGIN", idle], ["a pg client after COMMIT", committed]];
            return { handles, release: async () => (idle.release(), committed.release()) };
          };
          const client = async () => {
            const c = await pool.connect();
            return { client: c, release: async () => c.release() };
          };
          return { db, adapter, outsideTransaction, client, close: async () => (await adapter.close(), await db.destroy()) };
        },
      };
    },
    async dispose() {
      await admin.end();
      await dropPgDatabase(PG_URL, database);
    },
  };
}

export async function mysqlTarget(MYSQL_URL: string): Promise<DisposableTarget> {
  const { mysqlAdapter } = await import("../../src/adapters/mysql/index.ts");
  const mysql = (await import("mysql2/promise")).default;
  const database = `docket_test_${runId}`;
  const root = await mysql.createConnection({ uri: MYSQL_URL });
  await root.query(`CREATE DATABASE ${database}`);
  await root.end();
  const url = withDatabase(MYSQL_URL, database);
  const admin = mysql.createPool({ uri: url, connectionLimit: 2 });
  return {
    name: "mysql",
    async open(): Promise<KyselyTestStore> {
      const tablePrefix = nextPrefix();
      return {
        tablePrefix,
        location: url,
        connect: async (o?: ConnectOptions) => mysqlAdapter({ uri: url, tablePrefix, connectionLimit: 4, ...o }),
        execute: async (sql) => void (await admin.query(sql.replaceAll("{jobs}", `${tablePrefix}jobs`))),
        close: async () => undefined,
        async application() {
          const { Kysely, MysqlDialect } = await import("kysely");
          const { createPool } = (await import("mysql2")).default;
          const pool = createPool({ uri: url, connectionLimit: 2 });
          const db = new Kysely<any>({ dialect: new MysqlDialect({ pool }) });
          const adapter = mysqlAdapter({ uri: url, tablePrefix, connectionLimit: 4 });
          const outsideTransaction = async () => {
            const connection = await new Promise<import("mysql2").PoolConnection>((resolve, reject) => pool.getConnection((e, c) => (e ? reject(e) : resolve(c))));
            const handles: [string, object][] = [["a mysql2 pool", pool], ["a mysql2 promise pool", pool.promise()], ["a mysql2 connection", connection]];
            return { handles, release: async () => connection.release() };
          };
          return { db, adapter, outsideTransaction, close: async () => (await adapter.close(), await db.destroy()) };
        },
      };
    },
    async dispose() {
      await admin.end();
      const c = await mysql.createConnection({ uri: MYSQL_URL });
      await c.query(`DROP DATABASE IF EXISTS ${database}`);
      await c.end();
    },
  };
}

/**
 * A server in a container, when a container engine answers (a laptop with
 * Docker or Podman); null when there is none (probing fails within ms).
 */
async function containerUrl(name: "postgres" | "mysql"): Promise<string | null> {
  let tc: typeof import("testcontainers");
  try {
    tc = await import("testcontainers");
    await tc.getContainerRuntimeClient();
  } catch {
    return null;
  }
  if (name === "postgres") {
    const c = await new tc.GenericContainer("postgres:16")
      .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: "trust" })
      .withExposedPorts(5432)
      .withWaitStrategy(tc.Wait.forLogMessage(/ready to accept connections/, 2))
      .start();
    return `postgres://postgres@${c.getHost()}:${c.getMappedPort(5432)}/postgres`;
  }
  const c = await new tc.GenericContainer("mariadb:11")
    .withEnvironment({ MARIADB_ALLOW_EMPTY_ROOT_PASSWORD: "1" })
    .withExposedPorts(3306)
    .withWaitStrategy(tc.Wait.forLogMessage(/ready for connections/, 2))
    .start();
  return `mysql://root@${c.getHost()}:${c.getMappedPort(3306)}/mysql`;
}

/** Opens a server target: the env URL or local default first, else a container, else throws. */
async function serverTarget(
  name: "postgres" | "mysql",
  url: string,
  make: (url: string) => Promise<DisposableTarget>,
): Promise<DisposableTarget> {
  try {
    return await make(url);
  } catch (first) {
    const fromContainer = await containerUrl(name);
    if (!fromContainer) throw first;
    return make(fromContainer);
  }
}

/**
 * The in-process adapter: each store is one memory state, and every
 * `connect()` another handle on it (a second connection, in one process).
 * It has no SQL, no kysely seam and no location another process could open.
 */
export async function memoryTarget(): Promise<DisposableTarget<TestStore>> {
  const { memoryAdapter } = await import("../../src/adapters/memory/index.ts");
  return {
    name: "memory",
    provides: [],
    async open(): Promise<TestStore> {
      const root = memoryAdapter();
      return {
        tablePrefix: "",
        connect: async () => root.connect(),
        execute: async () => {
          throw new Error("a memory store runs no SQL");
        },
        close: () => root.close(),
      };
    },
    dispose: async () => undefined,
  };
}

const FACTORIES: Record<ConformanceTargetName, () => Promise<DisposableTarget>> = {
  sqlite: sqliteTarget,
  memory: memoryTarget,
  postgres: () => serverTarget("postgres", PG_URL, postgresTarget),
  mysql: () => serverTarget("mysql", MYSQL_URL, mysqlTarget),
};
/**
 * The target, or null when its server is unreachable and not required.
 * Prints a loud banner when it skips.
 */
export async function openTarget(name: ConformanceTargetName): Promise<DisposableTarget | null> {
  try {
    return await FACTORIES[name]();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    if (REQUIRE_ALL) throw new Error(`DOCKET_REQUIRE_ALL_ADAPTERS=1 but the ${name} target is unavailable: ${reason}`, { cause: error });
    const bar = "!".repeat(78);
    console.warn(`\n${bar}\n!! SKIPPING every ${name} test: ${reason}\n!! Set DOCKET_${name === "postgres" ? "PG" : "MYSQL"}_URL or start the server.\n${bar}\n`);
    return null;
  }
}

/**
 * Creates a PostgreSQL database of this test file's own (name `${prefix}_…`)
 * and returns its URL and name; null, after a loud banner, when the server
 * does not answer and DOCKET_REQUIRE_ALL_ADAPTERS is not set (then it throws).
 */
export async function createPgTestDatabase(prefix: string, what: string): Promise<{ url: string; database: string } | null> {
  const pg = (await import("pg")).default;
  const database = `${prefix}_${process.pid.toString(36)}${Date.now().toString(36)}`;
  try {
    const root = new pg.Client({ connectionString: PG_URL });
    await root.connect();
    await root.query(`CREATE DATABASE ${database}`);
    await root.end();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    if (REQUIRE_ALL) throw new Error(`DOCKET_REQUIRE_ALL_ADAPTERS=1 but PostgreSQL is unavailable: ${reason}`, { cause: error });
    console.warn(`\n${"!".repeat(78)}\n!! SKIPPING ${what}: ${reason}\n${"!".repeat(78)}\n`);
    return null;
  }
  const url = new URL(PG_URL);
  url.pathname = `/${database}`;
  return { url: url.toString(), database };
}

/** A fresh MariaDB database for a test file, or null (with a loud warning) when the server is down and not required. */
export async function createMysqlTestDatabase(prefix: string, what: string): Promise<{ url: string; database: string } | null> {
  const database = `${prefix}_${process.pid.toString(36)}${Date.now().toString(36)}`;
  try {
    const mysql = (await import("mysql2/promise")).default;
    const c = await mysql.createConnection({ uri: MYSQL_URL });
    await c.query(`CREATE DATABASE ${database}`);
    await c.end();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    if (REQUIRE_ALL) throw new Error(`DOCKET_REQUIRE_ALL_ADAPTERS=1 but MariaDB is unavailable: ${reason}`, { cause: error });
    console.warn(`\n${"!".repeat(78)}\n!! SKIPPING ${what}: ${reason}\n${"!".repeat(78)}\n`);
    return null;
  }
  return { url: withDatabase(MYSQL_URL, database), database };
}

export async function dropMysqlDatabase(database: string): Promise<void> {
  const mysql = (await import("mysql2/promise")).default;
  const c = await mysql.createConnection({ uri: MYSQL_URL });
  await c.query(`DROP DATABASE IF EXISTS ${database}`);
  await c.end();
}
