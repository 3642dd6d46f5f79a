import { PostgresDialect, sql, type PostgresPool } from "kysely";
import { KyselyAdapter, createKysely, type AnyDb, type InstrumentOptions, type Migration } from "../shared/kysely-adapter.ts";
import { migrations } from "./migrations.ts";
import { checkKeys } from "../../core/validate.ts";
import { InvalidArgumentError } from "../../core/errors.ts";
import { guardedPool, type GuardedPool } from "./pool.ts";
import { ReadyListener, readyPayload, type ListenClient } from "./listener.ts";
import type { ReadyNotice } from "../../core/adapter.ts";

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
  /** Or a connection string; docket opens (and on `close()` ends) its own pool. */
  connectionString?: string;
  /** Pool size when docket opens the pool. Default 10. */
  max?: number;
  /** Prefix of docket's table names. Default "docket_". */
  tablePrefix?: string;
  /** Dialect wrapper and kysely plugins (tracing, test scheduling). */
  instrument?: InstrumentOptions;
}

/**
 * PostgreSQL: `UPDATE … RETURNING` makes every guarded write one statement;
 * claims lock candidates with `FOR UPDATE SKIP LOCKED`. Transactions run at
 * READ COMMITTED, where a guarded UPDATE re-checks its WHERE clause on the
 * newest row version after waiting for a lock, so a lost race matches zero rows.
 */
export class PostgresAdapter extends KyselyAdapter {
  readonly name = "postgres";
  readonly #prefix: string;
  readonly #callerPool: GuardedPool | null;
  readonly #channel: string;
  readonly #listener: ReadyListener;

  constructor(options: PostgresAdapterOptions) {
    checkKeys(options, ["pool", "connectionString", "max", "tablePrefix", "instrument"], "postgresAdapter(options)");
    const { pool, connectionString } = options;
    if ((pool === undefined) === (connectionString === undefined)) {
      throw new InvalidArgumentError("postgresAdapter needs exactly one of `pool` or `connectionString`");
    }
    const max = options.max ?? 10;
    if (!Number.isSafeInteger(max) || max < 1) throw new InvalidArgumentError(`max must be an integer >= 1, got ${max}`);
    const prefix = options.tablePrefix ?? "docket_";
    // The pool is opened lazily, after construction: errors reach `this` through this sink.
    const sink = { report: (_error: unknown): void => undefined };
    const report = (error: unknown) => sink.report(error);
    const guarded = pool ? guardedPool(pool, report, false) : null;
    const dialect = new PostgresDialect({
      pool: guarded ? guarded.pool : async () => guardedPool(await openPgPool(connectionString!, max), report, true).pool,
    });
    super(createKysely(dialect, options.instrument), prefix, pool === undefined);
    sink.report = (error) => this.reportBackgroundError(error);
    this.#prefix = prefix;
    this.#callerPool = guarded;
    this.#channel = `${prefix}ready`;
    // A dedicated connection: a caller's pool lends one client (destroyed, not returned, when done).
    const openListen = pool
      ? async () => {
          const client = (await pool.connect()) as unknown as ListenClient & { release(destroy?: boolean): void };
          return { client, release: async () => client.release(true) };
        }
      : async () => {
          const client = await openPgClient(connectionString!);
          return { client, release: async () => void (await (client as unknown as { end(): Promise<void> }).end()) };
        };
    this.#listener = new ReadyListener(openListen, this.#channel, (error) => this.reportBackgroundError(error));
  }

  /** LISTEN on a dedicated connection while anyone is subscribed; see DocketAdapter.onReady. */
  onReady(listener: (notice: ReadyNotice) => void): () => void {
    return this.#listener.subscribe(listener);
  }

  /** One NOTIFY per distinct notice, sent when the caller's transaction commits. */
  protected override async announceReady(db: AnyDb, notices: readonly { queue: string; due: boolean }[]): Promise<void> {
    if (notices.length === 0) return;
    const payloads = [...new Set(notices.map((n) => readyPayload(n.queue, n.due)))];
    await sql`select pg_notify(${this.#channel}, p) from unnest(${payloads}::text[]) as p`.execute(db);
  }

  /** The caller's pool outlives this adapter: take docket's listeners off it. */
  protected override async closeExtra(): Promise<void> {
    await this.#listener.close();
    this.#callerPool?.detach();
  }

  override get supportsClaimStatement(): boolean {
    return true;
  }

  override get supportsAnyArray(): boolean {
    return true;
  }

  override get supportsReturning(): boolean {
    return true;
  }

  override get supportsSkipLocked(): boolean {
    return true;
  }

  override get supportsRowLocks(): boolean {
    return true;
  }

  /** SQLSTATE 42P01 undefined_table; the name is in the message: relation "x" does not exist. */
  protected override missingTable(error: unknown): string | null {
    if ((error as { code?: unknown })?.code !== "42P01") return null;
    return /relation "([^"]+)"/.exec(String((error as Error).message))?.[1] ?? `${this.#prefix}jobs`;
  }

  protected migrations(): readonly Migration[] {
    return migrations(this.#prefix);
  }

  protected writeTransaction<T>(fn: (db: AnyDb) => Promise<T>): Promise<T> {
    return this.db.transaction().execute(fn);
  }

  /** A single `UPDATE … RETURNING` is atomic on its own: no BEGIN/COMMIT round trips. */
  protected override writeStatement<T>(fn: (db: AnyDb) => Promise<T>): Promise<T> {
    return fn(this.db);
  }

  /** DDL is transactional here: the advisory lock and the migration commit together. */
  protected withMigrationLock<T>(fn: (db: AnyDb) => Promise<T>): Promise<T> {
    return this.db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(hashtext(${"docket:migrate:" + this.#prefix}))`.execute(trx);
      return fn(trx);
    });
  }
}

async function openPgClient(connectionString: string): Promise<ListenClient> {
  const mod = await import("pg");
  const pg = (mod as unknown as { default?: typeof mod }).default ?? mod;
  const client = new pg.Client({ connectionString });
  // Until connect() settles, an error is its rejection; an 'error' event must still find a listener.
  client.on("error", () => undefined);
  await client.connect();
  return client as unknown as ListenClient;
}

async function openPgPool(connectionString: string, max: number): Promise<PostgresPool> {
  const mod = await import("pg");
  const pg = (mod as unknown as { default?: typeof mod }).default ?? mod;
  return new pg.Pool({ connectionString, max }) as unknown as PostgresPool;
}
