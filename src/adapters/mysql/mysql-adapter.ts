import { MysqlDialect, type MysqlPool } from "kysely";
import { InvalidArgumentError } from "../../core/errors.ts";
import { shown } from "../../core/shown.ts";
import { checkKeys } from "../../core/validate.ts";
import { createKysely, type InstrumentOptions } from "../kysely/engine.ts";
import { KyselyStore } from "../kysely/store.ts";
import { validateTablePrefix } from "../kysely/identifiers.ts";
import { mysqlEngine } from "./mysql-engine.ts";
import { discardingClosedConnections, poolQuery } from "./pool.ts";
import { WAKE_CHECK_MS, wakes } from "./wakes.ts";
import { loadDriver } from "../kysely/driver.ts";

/** MariaDB's identifiers hold 64 characters, and its longest schema name is the prefix + "jobs_idempotency_nonempty" (25). */
export const MYSQL_MAX_TABLE_PREFIX = 64 - "jobs_idempotency_nonempty".length;

export interface MysqlAdapterOptions {
  /**
   * A mysql2 pool: `createPool` of "mysql2", or of "mysql2/promise" (docket
   * uses the callback pool it wraps). The caller keeps ownership: `close()` does
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
  /** Dialect wrapper, kysely plugins, engine wrapper (tracing, test scheduling). */
  instrument?: InstrumentOptions;
  /**
   * How often (ms) a process with idle workers reads the store's wake
   * counters, so that a job another process enqueued (or a slot it freed)
   * starts without waiting for the next poll. Default 25; 0 turns wake-ups
   * off (no checks, and no counter writes from this process). See wakes.ts.
   */
  wakeCheckMs?: number;
}

/** Validates `options` and opens a store on MySQL/MariaDB (the pool lazily, on first use). Throws InvalidArgumentError on bad options. */
export function openMysql(options: MysqlAdapterOptions): KyselyStore {
  if (options === undefined) throw new InvalidArgumentError("mysqlAdapter needs options: { uri } or { pool }");
  checkKeys(options, ["pool", "uri", "connectionLimit", "tablePrefix", "instrument", "wakeCheckMs"], "mysqlAdapter(options)");
  const { uri } = options;
  if ((options.pool === undefined) === (uri === undefined)) {
    throw new InvalidArgumentError("mysqlAdapter needs exactly one of `pool` or `uri`");
  }
  const pool = options.pool === undefined ? undefined : callbackPoolOf(options.pool);
  if (uri !== undefined) checkUri(uri);
  const limit = options.connectionLimit ?? 10;
  if (!Number.isSafeInteger(limit) || limit < 1) throw new InvalidArgumentError(`connectionLimit must be an integer >= 1, got ${shown(limit)}`);
  const prefix = validateTablePrefix(options.tablePrefix ?? "docket_", MYSQL_MAX_TABLE_PREFIX, "MariaDB");
  const wakeCheckMs = options.wakeCheckMs ?? WAKE_CHECK_MS;
  if (!Number.isSafeInteger(wakeCheckMs) || wakeCheckMs < 0) throw new InvalidArgumentError(`wakeCheckMs must be an integer >= 0, got ${shown(wakeCheckMs)}`);
  // The pool is opened lazily, after construction: errors reach the store through this sink.
  const sink = { report: (_error: unknown): void => undefined };
  // A connection the server closed after an error is destroyed, never handed out again (see pool.ts).
  let opened: MysqlPool | null = pool ? discardingClosedConnections(pool) : null;
  let opening: Promise<MysqlPool> | null = null;
  const ready = (): Promise<MysqlPool> =>
    opened ? Promise.resolve(opened) : (opening ??= openMysqlPool(uri!, limit, (error) => sink.report(error)).then((p) => (opened = discardingClosedConnections(p))));
  const dialect = new MysqlDialect({ pool: opened ?? ready });
  const wake = wakeCheckMs === 0 ? null : wakes({ table: `${prefix}wakes`, pool: () => opened, intervalMs: wakeCheckMs, report: (error) => sink.report(error) });
  const store = new KyselyStore({
    db: createKysely(dialect, options.instrument),
    engine: mysqlEngine({ prefix, sessionReadCommitted: pool === undefined, wakes: wake, galera: async () => wsrepOn(await ready()) }),
    tablePrefix: prefix,
    ownsDb: pool === undefined,
    instrument: options.instrument,
  });
  sink.report = (error) => store.reportBackgroundError(error);
  return store;
}

/**
 * The callback pool behind `pool`: a mysql2/promise pool (`createPool` of
 * "mysql2/promise") wraps one as its `.pool`, and kysely drives only the
 * callback API (given the promise pool itself, every call waited forever
 * for a callback that never came). Anything else is taken as given; a
 * value with no `getConnection` is InvalidArgumentError.
 */
function callbackPoolOf(pool: unknown): MysqlPool {
  const inner = (pool as { pool?: { getConnection?: unknown } } | null)?.pool;
  if (inner && typeof inner.getConnection === "function") return inner as unknown as MysqlPool;
  if (typeof (pool as { getConnection?: unknown } | null)?.getConnection !== "function") throw new InvalidArgumentError("pool must be a mysql2 pool (mysql2's createPool, or mysql2/promise's)");
  return pool as MysqlPool;
}

/**
 * Refuses a `uri` mysql2 could not read (it parses it with `new URL`, and
 * its error would carry the whole text, password included, on every call).
 * The message never repeats the URI.
 */
function checkUri(uri: unknown): void {
  if (typeof uri !== "string" || uri === "") throw new InvalidArgumentError("uri must be a non-empty string: mysql://user:password@host:port/database");
  try {
    new URL(uri);
  } catch {
    throw new InvalidArgumentError("uri is not a URL (mysql://user:password@host:port/database): check its host and port; it is not repeated here, as it may hold a password");
  }
}

/**
 * Opens a mysql2 pool whose every connection has an `'error'` listener, so a
 * connection the server kills is reported to `report`, never an unhandled
 * event, and runs at READ COMMITTED for its whole session: set before the
 * connection's first use (mysql2 runs a connection's commands in order); a
 * connection that cannot be set is destroyed, never used at another level.
 * On a Galera node its reads are causal (`wsrep_sync_wait` 1: a read waits
 * until the node applied what the cluster committed before it); MySQL,
 * which has no such variable (errno 1193), is left as it is.
 */
async function openMysqlPool(uri: string, connectionLimit: number, report: (error: unknown) => void): Promise<MysqlPool> {
  const mod = await loadDriver("mysql2", "MySQL", () => import("mysql2"));
  const mysql = (mod as unknown as { default?: typeof mod }).default ?? mod;
  const pool = mysql.createPool({ uri, connectionLimit });
  pool.on("connection", (connection) => {
    connection.on("error", report);
    connection.query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", (error) => {
      if (!error) return;
      report(error);
      connection.destroy();
    });
    connection.query("SET SESSION wsrep_sync_wait = IF(@@wsrep_on, 1, @@wsrep_sync_wait)", (error) => {
      if (!error || (error as { errno?: number }).errno === 1193) return;
      report(error);
      connection.destroy();
    });
  });
  return pool as unknown as MysqlPool;
}

/** Whether the server behind `pool` is a Galera node (`wsrep_on`); read on one of its connections, beside kysely. */
async function wsrepOn(pool: MysqlPool): Promise<boolean> {
  const [row] = (await poolQuery(pool, "SHOW VARIABLES LIKE 'wsrep_on'")) as { Value?: string }[];
  return String(row?.Value ?? "OFF").toUpperCase() === "ON";
}
