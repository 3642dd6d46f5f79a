import { MysqlDialect, sql, type MysqlPool } from "kysely";
import { KyselyAdapter, createKysely, type AnyDb, type InstrumentOptions, type Migration } from "../shared/kysely-adapter.ts";
import { migrations } from "./migrations.ts";
import { AdapterError, InvalidArgumentError } from "../../core/errors.ts";
import { checkKeys } from "../../core/validate.ts";

export interface MysqlAdapterOptions {
  /**
   * A mysql2 (callback API) pool. The caller keeps ownership: `close()` does
   * not end it. Attach an `'error'` listener to its connections
   * (`pool.on("connection", c => c.on("error", …))`) so a connection the
   * server kills is not an unhandled event; docket does this for pools it opens.
   */
  pool?: MysqlPool;
  /** Or a connection URI; docket opens (and on `close()` ends) its own pool. */
  uri?: string;
  /** Pool size when docket opens the pool. Default 10. */
  connectionLimit?: number;
  /** Prefix of docket's table names. Default "docket_". */
  tablePrefix?: string;
  /** Dialect wrapper and kysely plugins (tracing, test scheduling). */
  instrument?: InstrumentOptions;
}

/** errno of InnoDB's deadlock victim and of a lock wait timeout: the transaction rolled back and may be retried. */
const RETRYABLE_ERRNOS = new Set([1213, 1205]);
const MAX_TRANSACTION_TRIES = 5;

/**
 * MySQL 8 / MariaDB 10.6+. There is no `UPDATE … RETURNING` (and MySQL 8
 * has no `INSERT … RETURNING`), so a guarded write is UPDATE then SELECT in
 * one transaction, and a claim is `SELECT … FOR UPDATE SKIP LOCKED` then
 * UPDATE (MariaDB rejects `UPDATE … WHERE id IN (SELECT … LIMIT n)`).
 * Transactions run at READ COMMITTED, which takes no gap locks, and are
 * retried whole when InnoDB picks them as a deadlock victim.
 */
export class MysqlAdapter extends KyselyAdapter {
  readonly name = "mysql";
  readonly #prefix: string;

  constructor(options: MysqlAdapterOptions) {
    checkKeys(options, ["pool", "uri", "connectionLimit", "tablePrefix", "instrument"], "mysqlAdapter(options)");
    const { pool, uri } = options;
    if ((pool === undefined) === (uri === undefined)) {
      throw new InvalidArgumentError("mysqlAdapter needs exactly one of `pool` or `uri`");
    }
    const limit = options.connectionLimit ?? 10;
    if (!Number.isSafeInteger(limit) || limit < 1) throw new InvalidArgumentError(`connectionLimit must be an integer >= 1, got ${limit}`);
    const prefix = options.tablePrefix ?? "docket_";
    // The pool is opened lazily, after construction: errors reach `this` through this sink.
    const sink = { report: (_error: unknown): void => undefined };
    const dialect = new MysqlDialect({ pool: pool ?? (() => openMysqlPool(uri!, limit, (error) => sink.report(error))) });
    super(createKysely(dialect, options.instrument), prefix, pool === undefined);
    sink.report = (error) => this.reportBackgroundError(error);
    this.#prefix = prefix;
  }

  override get supportsSkipLocked(): boolean {
    return true;
  }

  override get supportsRowLocks(): boolean {
    return true;
  }

  /** MariaDB spells a shared row lock `LOCK IN SHARE MODE` (it has no `FOR SHARE`). */
  // deno-lint-ignore no-explicit-any
  protected override shareLock<Q>(query: Q): Q {
    return (query as any).modifyEnd(sql`lock in share mode`);
  }

  #insertStep: Promise<number | null> | null = null;

  /**
   * InnoDB gives the rows of one multi-row ("simple") INSERT consecutive
   * ids, `auto_increment_increment` apart, in lock modes 0 and 1 (MariaDB's
   * default is 1); mode 2 may interleave them with concurrent inserts, so
   * then each row is inserted on its own. Read once per adapter.
   */
  protected override consecutiveInsertIds(db: AnyDb): Promise<number | null> {
    this.#insertStep ??= sql<{ mode: number | string; step: number | string }>`select @@innodb_autoinc_lock_mode as mode, @@auto_increment_increment as step`
      .execute(db)
      .then((r) => {
        const row = r.rows[0];
        return row && Number(row.mode) <= 1 ? Number(row.step) : null;
      })
      .catch((error) => {
        this.#insertStep = null;
        throw error;
      });
    return this.#insertStep;
  }

  /** MySQL spells upsert `INSERT … ON DUPLICATE KEY UPDATE`. */
  override get supportsOnConflict(): boolean {
    return false;
  }

  /** errno 1146 ER_NO_SUCH_TABLE: Table 'db.x' doesn't exist. */
  protected override missingTable(error: unknown): string | null {
    if ((error as { errno?: unknown })?.errno !== 1146) return null;
    return /Table '(?:[^'.]+\.)?([^']+)'/.exec(String((error as Error).message))?.[1] ?? `${this.#prefix}jobs`;
  }

  protected migrations(): readonly Migration[] {
    return migrations(this.#prefix);
  }

  protected async writeTransaction<T>(fn: (db: AnyDb) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.db.transaction().setIsolationLevel("read committed").execute(fn);
      } catch (error) {
        const errno = (error as { errno?: unknown }).errno;
        if (attempt >= MAX_TRANSACTION_TRIES || typeof errno !== "number" || !RETRYABLE_ERRNOS.has(errno)) throw error;
      }
    }
  }

  /**
   * DDL is not transactional here: a named lock (GET_LOCK) held on one
   * connection serializes migrations; each version is one statement.
   */
  protected withMigrationLock<T>(fn: (db: AnyDb) => Promise<T>): Promise<T> {
    const name = `docket:migrate:${this.#prefix}`;
    return this.db.connection().execute(async (conn) => {
      const got = await sql<{ locked: number | null }>`select get_lock(${name}, 60) as locked`.execute(conn);
      if (Number(got.rows[0]?.locked) !== 1) throw new AdapterError(`mysql: could not take the migration lock ${name} within 60 s`);
      try {
        return await fn(conn);
      } finally {
        await sql`select release_lock(${name})`.execute(conn);
      }
    });
  }
}

/**
 * Opens a mysql2 pool whose every connection has an `'error'` listener, so a
 * connection the server kills is reported to `report`, never an unhandled event.
 */
async function openMysqlPool(uri: string, connectionLimit: number, report: (error: unknown) => void): Promise<MysqlPool> {
  const mod = await import("mysql2");
  const mysql = (mod as unknown as { default?: typeof mod }).default ?? mod;
  const pool = mysql.createPool({ uri, connectionLimit });
  pool.on("connection", (connection) => void connection.on("error", report));
  return pool as unknown as MysqlPool;
}
