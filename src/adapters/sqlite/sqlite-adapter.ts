import { CompiledQuery, SqliteDialect, type SqliteDatabase } from "kysely";
import { createKysely, type InstrumentOptions } from "../kysely/engine.ts";
import { KyselyStore } from "../kysely/store.ts";
import { validateTablePrefix } from "../kysely/identifiers.ts";
import { sqliteEngine } from "./sqlite-engine.ts";
import { checkKeys } from "../../core/validate.ts";
import { AdapterError, InvalidArgumentError } from "../../core/errors.ts";
import { shown } from "../../core/shown.ts";
import { nodeSqliteDatabase, type NodeSqliteDatabaseSync } from "./node-sqlite.ts";
import { COMMIT_CHECK_MS, commitWatch } from "./commit-watch.ts";
import { loadDriver } from "../kysely/driver.ts";

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
  /**
   * Open `filename` only if the file exists. Default false: a missing file
   * is created (empty). When true, the first call on a missing file fails
   * with AdapterError naming it, and no file is created.
   */
  fileMustExist?: boolean;
  /** Prefix of docket's table names. Default "docket_". */
  tablePrefix?: string;
  /** Dialect wrapper, kysely plugins, engine wrapper (tracing, test scheduling). */
  instrument?: InstrumentOptions;
  /**
   * How long a write waits for the write lock another connection holds
   * (another process, or another handle on the file in this one), then
   * fails with SQLite's "database is locked". Default 5000 ms. A write
   * transaction waits on timers, so the event loop runs meanwhile.
   */
  busyTimeoutMs?: number;
  /**
   * SQLite's `synchronous` setting. "full" (default): a commit is on disk
   * when the call returns, so what docket reported as written survives a
   * power loss or an OS crash. "normal": faster commits in WAL mode, but a
   * power loss or OS crash (not a process crash) can drop the last commits,
   * i.e. enqueued jobs or recorded outcomes the caller was told are stored.
   */
  synchronous?: "full" | "normal";
  /**
   * How often an idle worker checks whether another connection (another
   * process, or another handle on the file) committed, so that a job
   * enqueued there starts without waiting for the worker's next poll
   * (`pollMs`). Each check reads `PRAGMA data_version`: no disk I/O, a few
   * microseconds. Default 25 ms; 0 turns the checks off (such jobs then wait
   * for the next poll).
   */
  commitCheckMs?: number;
}

/** Validates `options` and opens a store on SQLite (the file lazily, on first use). Throws InvalidArgumentError on bad options. */
export function openSqlite(options: SqliteAdapterOptions): KyselyStore {
  if (options === undefined) throw new InvalidArgumentError("sqliteAdapter needs options: { filename } or { database }");
  checkKeys(options, ["database", "filename", "fileMustExist", "tablePrefix", "instrument", "busyTimeoutMs", "synchronous", "commitCheckMs"], "sqliteAdapter(options)");
  const { database, filename } = options;
  if ((database === undefined) === (filename === undefined)) {
    throw new InvalidArgumentError("sqliteAdapter needs exactly one of `database` or `filename`");
  }
  const mustExist = options.fileMustExist ?? false;
  if (typeof mustExist !== "boolean") throw new InvalidArgumentError(`fileMustExist must be a boolean, got ${shown(mustExist)}`);
  const busy = options.busyTimeoutMs ?? 5000;
  if (!Number.isSafeInteger(busy) || busy < 0) throw new InvalidArgumentError(`busyTimeoutMs must be an integer >= 0, got ${shown(busy)}`);
  const synchronous = options.synchronous ?? "full";
  if (synchronous !== "full" && synchronous !== "normal") {
    throw new InvalidArgumentError(`synchronous must be "full" or "normal", got ${shown(synchronous)}`);
  }
  const checkMs = options.commitCheckMs ?? COMMIT_CHECK_MS;
  if (!Number.isSafeInteger(checkMs) || checkMs < 0) throw new InvalidArgumentError(`commitCheckMs must be an integer >= 0, got ${shown(checkMs)}`);
  const prefix = validateTablePrefix(options.tablePrefix ?? "docket_");
  const pragmas = [`PRAGMA busy_timeout = ${busy}`, ...(filename === ":memory:" ? [] : ["PRAGMA journal_mode = WAL"]), `PRAGMA synchronous = ${synchronous.toUpperCase()}`];
  // A handle the caller gave may carry the caller's own transactions, inside which the journal mode and the
  // safety level cannot change: set them now, when it is free, else on first use once its transaction ended.
  let configured = database !== undefined && !inTransaction(database) && (applyPragmas(database, pragmas), true);
  let opened: SqliteDatabase | null = database ?? null;
  const dialect = new SqliteDialect({
    database: database ?? (async () => (opened = await openSqliteFile(filename!, mustExist))),
    onCreateConnection: async (conn) => {
      if (configured) return;
      while (database !== undefined && inTransaction(database)) await new Promise((resolve) => setTimeout(resolve, 2));
      for (const pragma of pragmas) await conn.executeQuery(CompiledQuery.raw(pragma));
      configured = true;
    },
  });
  return new KyselyStore({
    db: createKysely(dialect, options.instrument),
    engine: sqliteEngine({
      prefix,
      busyTimeoutMs: busy,
      inOutsideTransaction: database === undefined ? undefined : () => inTransaction(database),
      commits: checkMs > 0 && filename !== ":memory:" ? commitWatch(() => opened, checkMs) : undefined,
    }),
    tablePrefix: prefix,
    ownsDb: database === undefined,
    instrument: options.instrument,
  });
}

/**
 * Opens `filename` with better-sqlite3 on Node; on Deno, where better-sqlite3
 * cannot load, with the built-in `node:sqlite` behind the same shape. With
 * `mustExist`, a missing file is an AdapterError and is not created.
 */
async function openSqliteFile(filename: string, mustExist: boolean): Promise<SqliteDatabase> {
  const missing = (cause?: unknown) => new AdapterError(`sqlite: no database file at ${filename} (or it cannot be opened); fileMustExist: a missing file is not created`, { cause });
  if ("Deno" in globalThis) {
    // node:sqlite has no open-only-if-it-exists flag.
    if (mustExist && filename !== ":memory:" && !(await import("node:fs")).existsSync(filename)) throw missing();
    // A variable specifier: Node 20's types know no node:sqlite, and Node never reaches this line.
    const specifier = "node:sqlite";
    const { DatabaseSync } = (await import(specifier)) as { DatabaseSync: new (path: string) => NodeSqliteDatabaseSync };
    return nodeSqliteDatabase(new DatabaseSync(filename));
  }
  const mod = await loadDriver("better-sqlite3", "SQLite", () => import("better-sqlite3"));
  const Database = mod.default;
  try {
    return new Database(filename, { fileMustExist: mustExist }) as unknown as SqliteDatabase;
  } catch (error) {
    if (mustExist && (error as { code?: unknown }).code === "SQLITE_CANTOPEN") throw missing(error);
    throw error;
  }
}

/** Whether the handle has a transaction open: better-sqlite3's `inTransaction`, node:sqlite's `isTransaction`. */
function inTransaction(database: SqliteDatabase): boolean {
  const d = database as { inTransaction?: unknown; isTransaction?: unknown };
  return d.inTransaction === true || d.isTransaction === true;
}

/** Runs each PRAGMA on the handle, synchronously (the drivers are synchronous). */
function applyPragmas(database: SqliteDatabase, pragmas: readonly string[]): void {
  for (const pragma of pragmas) {
    const statement = database.prepare(pragma);
    if (statement.reader) statement.all([]);
    else statement.run([]);
  }
}
