import { CompiledQuery, SqliteDialect, sql, type SqliteDatabase } from "kysely";
import { KyselyAdapter, createKysely, type AnyDb, type InstrumentOptions, type Migration } from "../shared/kysely-adapter.ts";
import { Mutex } from "../shared/mutex.ts";
import { migrations } from "./migrations.ts";
import { checkKeys } from "../../core/validate.ts";
import { InvalidArgumentError } from "../../core/errors.ts";
import { nodeSqliteDatabase, type NodeSqliteDatabaseSync } from "./node-sqlite.ts";

export interface SqliteAdapterOptions {
  /**
   * An open database of the shape kysely's SqliteDialect expects: a
   * better-sqlite3 `Database` on Node, or `node:sqlite` through
   * `nodeSqliteDatabase()` on Deno. The caller keeps ownership: `close()`
   * does not close it.
   */
  database?: SqliteDatabase;
  /** Or a file to open (better-sqlite3 on Node, `node:sqlite` on Deno); closed by `close()`. */
  filename?: string;
  /** Prefix of docket's table names. Default "docket_". */
  tablePrefix?: string;
  /** Dialect wrapper and kysely plugins (tracing, test scheduling). */
  instrument?: InstrumentOptions;
  /** How long a write waits for another PROCESS's write lock. Default 5000 ms. */
  busyTimeoutMs?: number;
  /**
   * SQLite's `synchronous` setting. "full" (default): a commit is on disk
   * when the call returns, so what docket reported as written survives a
   * power loss or an OS crash. "normal": faster commits in WAL mode, but a
   * power loss or OS crash (not a process crash) can drop the last commits,
   * i.e. enqueued jobs or recorded outcomes the caller was told are stored.
   */
  synchronous?: "full" | "normal";
}

/**
 * Every SQLite write transaction in this process goes through this one lock
 * before `BEGIN IMMEDIATE`. The drivers are synchronous: a second connection
 * in the same process waiting on SQLite's write lock would block the event
 * loop, so the holder could never commit. Serializing here turns that wait
 * into a promise. (SQLite has one writer per file anyway.)
 */
const processWriters = new Mutex();

/**
 * SQLite: a single writer per database file. Claims need no row locks
 * (`supportsSkipLocked` is false) because every write transaction is
 * `BEGIN IMMEDIATE` and therefore serialized against all others, in this
 * process by `processWriters`, across processes by SQLite's lock.
 */
export class SqliteAdapter extends KyselyAdapter {
  readonly name = "sqlite";
  readonly #prefix: string;

  constructor(options: SqliteAdapterOptions) {
    checkKeys(options, ["database", "filename", "tablePrefix", "instrument", "busyTimeoutMs", "synchronous"], "sqliteAdapter(options)");
    const { database, filename } = options;
    if ((database === undefined) === (filename === undefined)) {
      throw new InvalidArgumentError("sqliteAdapter needs exactly one of `database` or `filename`");
    }
    const busy = options.busyTimeoutMs ?? 5000;
    if (!Number.isSafeInteger(busy) || busy < 0) throw new InvalidArgumentError(`busyTimeoutMs must be an integer >= 0, got ${busy}`);
    const synchronous = options.synchronous ?? "full";
    if (synchronous !== "full" && synchronous !== "normal") {
      throw new InvalidArgumentError(`synchronous must be "full" or "normal", got ${JSON.stringify(synchronous)}`);
    }
    const prefix = options.tablePrefix ?? "docket_";
    const dialect = new SqliteDialect({
      database: database ?? (() => openSqliteFile(filename!)),
      onCreateConnection: async (conn) => {
        await conn.executeQuery(CompiledQuery.raw(`PRAGMA busy_timeout = ${busy}`));
        if (filename !== ":memory:") await conn.executeQuery(CompiledQuery.raw("PRAGMA journal_mode = WAL"));
        await conn.executeQuery(CompiledQuery.raw(`PRAGMA synchronous = ${synchronous.toUpperCase()}`));
      },
    });
    super(createKysely(dialect, options.instrument), prefix, database === undefined);
    this.#prefix = prefix;
  }

  override get supportsClaimStatement(): boolean {
    return true;
  }

  override get supportsReturning(): boolean {
    return true;
  }

  /** SQLITE_ERROR "no such table: x" (better-sqlite3 and node:sqlite alike). */
  protected override missingTable(error: unknown): string | null {
    const match = /no such table: (\S+)/.exec(String((error as Error | undefined)?.message));
    return match ? match[1]! : null;
  }

  protected migrations(): readonly Migration[] {
    return migrations(this.#prefix);
  }

  protected writeTransaction<T>(fn: (db: AnyDb) => Promise<T>): Promise<T> {
    return processWriters.run(() =>
      this.db.connection().execute(async (conn) => {
        await sql`begin immediate`.execute(conn);
        try {
          const result = await fn(conn);
          await sql`commit`.execute(conn);
          return result;
        } catch (error) {
          await sql`rollback`.execute(conn).catch(() => undefined);
          throw error;
        }
      }),
    );
  }

  protected withMigrationLock<T>(fn: (db: AnyDb) => Promise<T>): Promise<T> {
    return this.writeTransaction(fn);
  }
}

/**
 * Opens `filename` with better-sqlite3 on Node; on Deno, where better-sqlite3
 * cannot load, with the built-in `node:sqlite` behind the same shape.
 */
async function openSqliteFile(filename: string): Promise<SqliteDatabase> {
  if ("Deno" in globalThis) {
    // A variable specifier: Node 20's types know no node:sqlite, and Node never reaches this line.
    const specifier = "node:sqlite";
    const { DatabaseSync } = (await import(specifier)) as { DatabaseSync: new (path: string) => NodeSqliteDatabaseSync };
    return nodeSqliteDatabase(new DatabaseSync(filename));
  }
  const mod = await import("better-sqlite3");
  const Database = mod.default;
  return new Database(filename) as unknown as SqliteDatabase;
}
