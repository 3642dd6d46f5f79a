import type { SqliteDatabase, SqliteStatement } from "kysely";
import { InvalidArgumentError } from "../../core/errors.ts";

/**
 * The part of `node:sqlite`'s `DatabaseSync` that docket uses, declared here
 * instead of imported (like kysely's `SqliteDatabase`): this module never
 * loads `node:sqlite`, so it also imports fine on Node 20, which lacks it.
 */
export interface NodeSqliteDatabaseSync {
  prepare(sql: string): NodeSqliteStatementSync;
  close(): void;
  /** Whether a transaction is open (newer `node:sqlite` only). */
  readonly isTransaction?: boolean;
}

/** The part of `node:sqlite`'s `StatementSync` that docket uses. */
export interface NodeSqliteStatementSync {
  all(...parameters: never[]): unknown[];
  iterate(...parameters: never[]): Iterable<unknown>;
  run(...parameters: never[]): { changes: number | bigint; lastInsertRowid: number | bigint };
  /** Present in Deno 2 and Node >= 22.16 / 23.11. */
  columns?(): readonly unknown[];
}

/**
 * Adapts a `node:sqlite` `DatabaseSync` (Deno 2; Node >= 22.16) to the
 * database shape kysely's SqliteDialect expects, the one better-sqlite3 has:
 *
 *     import { DatabaseSync } from "node:sqlite";
 *     const db = new DatabaseSync("jobs.db");
 *     const adapter = sqliteAdapter({ database: nodeSqliteDatabase(db) });
 *
 * How it matches better-sqlite3 for kysely:
 * - `reader` is true when the statement returns columns (a SELECT, a PRAGMA
 *   that reports, or any write with RETURNING), as better-sqlite3 defines it;
 *   kysely then reads rows with `all()`, else calls `run()`.
 * - `run()` returns `{ changes, lastInsertRowid }` (numbers; bigints only past
 *   2^53), which kysely turns into `numAffectedRows` and `insertId`.
 * - Parameters come as kysely's array and are spread into node:sqlite's
 *   positional arguments.
 * - Rows are copied to plain objects (node:sqlite's have a null prototype).
 * - Integers are read as numbers, like better-sqlite3 without safeIntegers;
 *   one beyond Number.MAX_SAFE_INTEGER throws a RangeError instead of losing
 *   precision (docket's ids and millisecond timestamps stay far below it).
 *   Blobs come back as Uint8Array rather than Buffer (docket stores none).
 *
 * The caller owns `db`: closing the adapter does not close it; the returned
 * object's `close()` does.
 */
export function nodeSqliteDatabase(db: NodeSqliteDatabaseSync): SqliteDatabase & { readonly inTransaction: boolean } {
  return {
    get inTransaction() {
      return db.isTransaction === true;
    },
    close: () => db.close(),
    prepare(sql: string): SqliteStatement {
      const stmt = db.prepare(sql);
      if (typeof stmt.columns !== "function") {
        throw new InvalidArgumentError("nodeSqliteDatabase needs StatementSync#columns() (Deno 2, Node >= 22.16)");
      }
      const args = (parameters: ReadonlyArray<unknown>) => parameters as never[];
      return {
        reader: stmt.columns().length > 0,
        all: (parameters) => stmt.all(...args(parameters)).map(plain),
        run: (parameters) => {
          const { changes, lastInsertRowid } = stmt.run(...args(parameters));
          return { changes, lastInsertRowid };
        },
        *iterate(parameters) {
          for (const row of stmt.iterate(...args(parameters))) yield plain(row);
        },
      };
    },
  };
}

function plain(row: unknown): unknown {
  return { ...(row as object) };
}
