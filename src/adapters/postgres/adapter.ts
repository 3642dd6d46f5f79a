import { PostgresDialect, sql, type PostgresPool } from "kysely";
import { KyselyAdapter, createKysely, type AnyDb, type InstrumentOptions, type Migration } from "../shared/kysely-adapter.ts";
import { migrations } from "./migrations.ts";
import { InvalidArgumentError } from "../../core/errors.ts";

export interface PostgresAdapterOptions {
  /** A `pg.Pool` (or compatible). The caller keeps ownership: `close()` does not end it. */
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

  constructor(options: PostgresAdapterOptions) {
    const { pool, connectionString } = options;
    if ((pool === undefined) === (connectionString === undefined)) {
      throw new InvalidArgumentError("postgresAdapter needs exactly one of `pool` or `connectionString`");
    }
    const max = options.max ?? 10;
    if (!Number.isSafeInteger(max) || max < 1) throw new InvalidArgumentError(`max must be an integer >= 1, got ${max}`);
    const prefix = options.tablePrefix ?? "docket_";
    const dialect = new PostgresDialect({ pool: pool ?? (() => openPgPool(connectionString!, max)) });
    super(createKysely(dialect, options.instrument), prefix, pool === undefined);
    this.#prefix = prefix;
  }

  override get supportsReturning(): boolean {
    return true;
  }

  override get supportsSkipLocked(): boolean {
    return true;
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

async function openPgPool(connectionString: string, max: number): Promise<PostgresPool> {
  const mod = await import("pg");
  const pg = (mod as unknown as { default?: typeof mod }).default ?? mod;
  return new pg.Pool({ connectionString, max }) as unknown as PostgresPool;
}
