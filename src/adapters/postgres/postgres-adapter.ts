import { PostgresDialect, type PostgresPool } from "kysely";
import { checkKeys } from "../../core/validate.ts";
import { InvalidArgumentError } from "../../core/errors.ts";
import { shown } from "../../core/shown.ts";
import { createKysely, type InstrumentOptions } from "../kysely/engine.ts";
import { KyselyStore } from "../kysely/store.ts";
import { validateTablePrefix } from "../kysely/identifiers.ts";
import { postgresEngine } from "./postgres-engine.ts";
import { guardedPool } from "./pool.ts";
import { PreparedTexts } from "./prepared.ts";
import { PROBE_WITHIN_MS, ReadyListener, type ListenClient, type NotifyProbe } from "./listener.ts";
import { sql } from "kysely";
import { loadDriver } from "../kysely/driver.ts";

export interface PostgresAdapterOptions {
  /**
   * A `pg.Pool` (or compatible). The caller keeps ownership: `close()` does
   * not end it. Until `close()`, docket guards every client checked out of
   * it (an `'error'` listener from checkout to release, reporting to
   * `onError`), but the pool's own `'error'` event, for a client dropped
   * while idle, is the caller's: attach `pool.on("error", …)`, or Node ends
   * the process when the server drops an idle connection.
   */
  pool?: PostgresPool;
  /**
   * Or a connection string; docket opens (and on `close()` ends) its own
   * pool. A new connection that the server has not answered within
   * `connect_timeout` seconds (a URL parameter, as libpq reads it; default
   * 10, 0 waits forever) fails, so a server that accepts connections but
   * never answers fails each statement after that long instead of hanging
   * it, and `listenConnectionString`'s connection the same way.
   */
  connectionString?: string;
  /** Pool size when docket opens the pool. Default 10. */
  max?: number;
  /** Prefix of docket's table names. Default "docket_". */
  tablePrefix?: string;
  /** Dialect wrapper, kysely plugins, engine wrapper (tracing, test scheduling). */
  instrument?: InstrumentOptions;
  /**
   * Run docket's hot statements (claim, completion, single enqueue) as named
   * prepared statements, parsed and planned once per connection. Default
   * true. Set false behind a pooler that cannot keep them, such as
   * PgBouncer in transaction mode before 1.21 (or without
   * `max_prepared_statements`). Left on there, the first statement such a
   * pooler refuses runs again unnamed, as every later one does, and
   * `logger` gets one warning naming this option.
   */
  preparedStatements?: boolean;
  /**
   * A connection string for the one connection that LISTENs for other
   * processes' ready notices, when the statements go through a pooler that
   * does not deliver them (PgBouncer in transaction mode): point it at the
   * server itself. Default: `connectionString`, or a client of `pool`.
   * Whichever it is, after each LISTEN the adapter sends a probe notice
   * through the statement pool; when it has not come back within 5 s, the
   * notices are not delivered, and `logger` gets one warning naming this
   * option (workers then find other processes' jobs at their next poll).
   */
  listenConnectionString?: string;
  /** Where the adapter's warnings go (one line when it stops naming statements). Default `console`; `null` silences it. */
  logger?: { warn(message: string): void } | null;
}

/** Validates `options` and opens a store on PostgreSQL (the pool lazily, on first use). Throws InvalidArgumentError on bad options. */
export function openPostgres(options: PostgresAdapterOptions): KyselyStore {
  if (options === undefined) throw new InvalidArgumentError("postgresAdapter needs options: { connectionString } or { pool }");
  checkKeys(options, ["pool", "connectionString", "max", "tablePrefix", "instrument", "preparedStatements", "listenConnectionString", "logger"], "postgresAdapter(options)");
  const { pool, connectionString } = options;
  if ((pool === undefined) === (connectionString === undefined)) {
    throw new InvalidArgumentError("postgresAdapter needs exactly one of `pool` or `connectionString`");
  }
  const max = options.max ?? 10;
  if (!Number.isSafeInteger(max) || max < 1) throw new InvalidArgumentError(`max must be an integer >= 1, got ${shown(max)}`);
  const prefix = validateTablePrefix(options.tablePrefix ?? "docket_");
  const usePrepared = options.preparedStatements ?? true;
  if (typeof usePrepared !== "boolean") throw new InvalidArgumentError(`preparedStatements must be true or false, got ${shown(usePrepared)}`);
  const logger = options.logger === undefined ? console : options.logger;
  if (logger !== null && (typeof logger !== "object" || typeof logger.warn !== "function")) {
    throw new InvalidArgumentError("logger must have a warn(message) method, or be null");
  }
  const { listenConnectionString } = options;
  if (listenConnectionString !== undefined && (typeof listenConnectionString !== "string" || listenConnectionString === "")) {
    throw new InvalidArgumentError("listenConnectionString must be a non-empty string");
  }
  if (connectionString !== undefined && (typeof connectionString !== "string" || connectionString === "")) {
    throw new InvalidArgumentError("connectionString must be a non-empty string");
  }
  if (connectionString !== undefined) connectTimeoutMs(connectionString, "connectionString");
  if (listenConnectionString !== undefined) connectTimeoutMs(listenConnectionString, "listenConnectionString");
  const prepared = usePrepared ? new PreparedTexts((message) => logger?.warn(message)) : null;
  // The pool is opened lazily, after construction: errors reach the store through this sink.
  const sink = { report: (_error: unknown): void => undefined };
  const report = (error: unknown) => sink.report(error);
  const guarded = pool ? guardedPool(pool, report, false, prepared) : null;
  const dialect = new PostgresDialect({
    pool: guarded ? guarded.pool : async () => guardedPool(await openPgPool(connectionString!, max), report, true, prepared).pool,
  });
  // A dedicated connection: `listenConnectionString`'s own, else a caller's pool lends one client
  // (destroyed, not returned, when done).
  const openListen = pool && listenConnectionString === undefined
    ? async () => {
        const client = (await pool.connect()) as unknown as ListenClient & { release(destroy?: boolean): void };
        return { client, release: async () => client.release(true) };
      }
    : async () => {
        const client = await openPgClient(listenConnectionString ?? connectionString!);
        return { client, release: async () => void (await (client as unknown as { end(): Promise<void> }).end()) };
      };
  const db = createKysely(dialect, options.instrument);
  const listener = new ReadyListener(openListen, `${prefix}ready`, report, silentNoticeProbe(db, logger, listenConnectionString !== undefined));
  // The caller's pool outlives the store: docket's listeners come off it at close.
  const engine = postgresEngine({ prefix, listener, onClose: () => guarded?.detach(), prepared });
  const store = new KyselyStore({ db, engine, tablePrefix: prefix, ownsDb: pool === undefined, instrument: options.instrument });
  sink.report = (error) => store.reportBackgroundError(error);
  return store;
}

/**
 * The probe that tells the user, once, when notices sent through the
 * statement pool do not reach the LISTEN connection (see NotifyProbe).
 */
function silentNoticeProbe(db: ReturnType<typeof createKysely>, logger: { warn(message: string): void } | null, ownListen: boolean): NotifyProbe {
  let warned = false;
  return {
    withinMs: PROBE_WITHIN_MS,
    send: async (channel, payload) => void (await sql`select pg_notify(${channel}, ${payload})`.execute(db)),
    onSilent: () => {
      if (warned) return;
      warned = true;
      logger?.warn(
        `docket postgresAdapter: a notice sent through the pool did not reach the LISTEN connection within ${PROBE_WITHIN_MS / 1000} s, ` +
          (ownListen
            ? "so listenConnectionString does not reach the server the statements run on (a pooler in between, or another server?). "
            : "so notices are not delivered: a transaction pooler (such as PgBouncer in transaction mode) is in between. ") +
          "Idle workers find other processes' jobs only at their next poll (pollMs, 1 s by default). " +
          (ownListen ? "Point listenConnectionString at the PostgreSQL server itself." : "Pass listenConnectionString pointing at the PostgreSQL server itself to wake them at once."),
      );
    },
  };
}

/** How long a new connection may wait for the server's answer when the URL does not say (libpq waits forever). */
export const DEFAULT_CONNECT_TIMEOUT_S = 10;

/**
 * The connect timeout `connectionString` asks for, in ms, for node-postgres's
 * `connectionTimeoutMillis` (which does not read the URL's `connect_timeout`):
 * its `connect_timeout` in whole seconds (0: no timeout), else
 * DEFAULT_CONNECT_TIMEOUT_S. Throws InvalidArgumentError, naming `what` but
 * not the URL (it may hold a password), for a value that is not a whole number.
 */
export function connectTimeoutMs(connectionString: string, what: string): number {
  const query = connectionString.indexOf("?");
  const given = query < 0 ? null : new URLSearchParams(connectionString.slice(query + 1)).get("connect_timeout");
  if (given === null) return DEFAULT_CONNECT_TIMEOUT_S * 1000;
  if (!/^\d{1,9}$/.test(given.trim())) throw new InvalidArgumentError(`${what}'s connect_timeout must be a whole number of seconds (0: no timeout), got ${shown(given)}`);
  // 0 is "no timeout" in node-postgres too.
  return Number(given.trim()) * 1000;
}

async function openPgClient(connectionString: string): Promise<ListenClient> {
  const mod = await loadDriver("pg", "PostgreSQL", () => import("pg"));
  const pg = (mod as unknown as { default?: typeof mod }).default ?? mod;
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: connectTimeoutMs(connectionString, "connectionString") });
  // Until connect() settles, an error is its rejection; an 'error' event must still find a listener.
  client.on("error", () => undefined);
  await client.connect();
  return client as unknown as ListenClient;
}

/**
 * docket's own pool. The connect timeout is each new connection's (its
 * Client's `connectionTimeoutMillis`), not the pool's: pg-pool's would also
 * fail a call that waits longer for a free connection (a pool held by slow
 * `ctx.transaction` handlers), which must wait as long as it takes.
 */
export async function openPgPool(connectionString: string, max: number): Promise<PostgresPool> {
  const mod = await loadDriver("pg", "PostgreSQL", () => import("pg"));
  const pg = (mod as unknown as { default?: typeof mod }).default ?? mod;
  const connectionTimeoutMillis = connectTimeoutMs(connectionString, "connectionString");
  class TimedClient extends pg.Client {
    constructor(config?: ConstructorParameters<typeof pg.Client>[0]) {
      super({ ...(typeof config === "object" ? config : {}), connectionTimeoutMillis });
    }
  }
  return new pg.Pool({ connectionString, max, Client: TimedClient }) as unknown as PostgresPool;
}
