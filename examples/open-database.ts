/**
 * The examples' database, by name: the application's own kysely instance and
 * a docket adapter on the same database (on SQLite one handle for both, so
 * docket's writes take turns with the application's transactions); or a
 * docket adapter alone (`openAdapter`).
 *
 * SQLite: `sqliteFile` (deleted first). PostgreSQL and MariaDB: DOCKET_PG_URL /
 * DOCKET_MYSQL_URL, or the local servers' defaults.
 */
import { rmSync } from "node:fs";
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect } from "kysely";
import type { DocketAdapter } from "../src/index.ts";

export async function openDatabase<Db>(which: string, sqliteFile: string): Promise<{ db: Kysely<Db>; adapter: DocketAdapter }> {
  if (which === "sqlite") {
    const { default: Database } = await import("better-sqlite3");
    const { sqliteAdapter } = await import("../src/adapters/sqlite/index.ts");
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${sqliteFile}${suffix}`, { force: true });
    const handle = new Database(sqliteFile);
    return { db: new Kysely<Db>({ dialect: new SqliteDialect({ database: handle }) }), adapter: sqliteAdapter({ database: handle }) };
  }
  if (which === "postgres") {
    const { default: pg } = await import("pg");
    const { postgresAdapter } = await import("../src/adapters/postgres/index.ts");
    const pool = new pg.Pool({ connectionString: process.env.DOCKET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres" });
    return { db: new Kysely<Db>({ dialect: new PostgresDialect({ pool }) }), adapter: postgresAdapter({ pool }) };
  }
  if (which !== "mysql") throw new Error(`unknown database ${JSON.stringify(which)}: sqlite, postgres or mysql`);
  const { createPool } = (await import("mysql2")).default;
  const { mysqlAdapter } = await import("../src/adapters/mysql/index.ts");
  const pool = createPool({ uri: process.env.DOCKET_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test" });
  return { db: new Kysely<Db>({ dialect: new MysqlDialect({ pool }) }), adapter: mysqlAdapter({ pool }) };
}

/** A docket adapter that owns its connections (closed by `docket.close()`), on the database named `which`. */
export async function openAdapter(which: string, sqliteFile: string): Promise<DocketAdapter> {
  if (which === "sqlite") {
    const { sqliteAdapter } = await import("../src/adapters/sqlite/index.ts");
    for (const suffix of ["", "-wal", "-shm"]) rmSync(`${sqliteFile}${suffix}`, { force: true });
    return sqliteAdapter({ filename: sqliteFile });
  }
  if (which === "postgres") {
    const { postgresAdapter } = await import("../src/adapters/postgres/index.ts");
    return postgresAdapter({ connectionString: process.env.DOCKET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres" });
  }
  if (which !== "mysql") throw new Error(`unknown database ${JSON.stringify(which)}: sqlite, postgres or mysql`);
  const { mysqlAdapter } = await import("../src/adapters/mysql/index.ts");
  return mysqlAdapter({ uri: process.env.DOCKET_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test" });
}
