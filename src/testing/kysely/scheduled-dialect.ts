import type { CompiledQuery, DatabaseConnection, Dialect, Driver, QueryResult, TransactionSettings } from "kysely";
import type { StatementScheduler } from "../schedule/statement-scheduler.ts";

export interface ScheduledDialectOptions {
  readonly scheduler: StatementScheduler;
  /** The label of this dialect's connection(s), e.g. the simulated worker "w1". */
  readonly connection: string;
  /** Runs once per raw connection, ungated, to learn its server-side id (for lock-wait detection and recovery). */
  readonly identify?: (connection: DatabaseConnection) => Promise<unknown>;
  /** Shortens a statement's SQL for its gate label. Default: the first 90 characters on one line. */
  readonly describe?: (query: CompiledQuery) => string;
}

/**
 * Wraps any kysely Dialect so that every statement, and every
 * begin/commit/rollback/savepoint, on its connections waits on a gate of
 * `options.scheduler` before it is sent. Use one such dialect (pool of 1) per
 * simulated worker.
 */
export function scheduledDialect(inner: Dialect, options: ScheduledDialectOptions): Dialect {
  return {
    createAdapter: () => inner.createAdapter(),
    createIntrospector: (db) => inner.createIntrospector(db),
    createQueryCompiler: () => inner.createQueryCompiler(),
    createDriver: () => new ScheduledDriver(inner.createDriver(), options),
  };
}

function defaultDescribe(query: CompiledQuery): string {
  const text = query.sql.replace(/\s+/g, " ").trim();
  return text.length > 90 ? `${text.slice(0, 87)}…` : text;
}

class ScheduledDriver implements Driver {
  readonly #inner: Driver;
  readonly #options: ScheduledDialectOptions;
  readonly #wrapped = new WeakMap<DatabaseConnection, GatedConnection>();
  readonly #raw = new WeakMap<GatedConnection, DatabaseConnection>();

  constructor(inner: Driver, options: ScheduledDialectOptions) {
    this.#inner = inner;
    this.#options = options;
  }

  init(): Promise<void> {
    return this.#inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const raw = await this.#inner.acquireConnection();
    let gated = this.#wrapped.get(raw);
    if (!gated) {
      if (this.#options.identify) {
        this.#options.scheduler.recordConnectionId(this.#options.connection, await this.#options.identify(raw));
      }
      gated = new GatedConnection(raw, this.#options);
      this.#wrapped.set(raw, gated);
      this.#raw.set(gated, raw);
    }
    return gated;
  }

  #rawOf(conn: DatabaseConnection): DatabaseConnection {
    return this.#raw.get(conn as GatedConnection) ?? conn;
  }

  #gate<T>(statement: string, send: () => Promise<T>): Promise<T> {
    return this.#options.scheduler.gate(this.#options.connection, statement, send);
  }

  beginTransaction(conn: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const label = settings.isolationLevel ? `begin (${settings.isolationLevel})` : "begin";
    return this.#gate(label, () => this.#inner.beginTransaction(this.#rawOf(conn), settings));
  }

  commitTransaction(conn: DatabaseConnection): Promise<void> {
    return this.#gate("commit", () => this.#inner.commitTransaction(this.#rawOf(conn)));
  }

  rollbackTransaction(conn: DatabaseConnection): Promise<void> {
    return this.#gate("rollback", () => this.#inner.rollbackTransaction(this.#rawOf(conn)));
  }

  async savepoint(conn: DatabaseConnection, name: string, compile: Parameters<NonNullable<Driver["savepoint"]>>[2]): Promise<void> {
    const inner = this.#inner;
    if (!inner.savepoint) throw new Error("the wrapped driver has no savepoints");
    return this.#gate(`savepoint ${name}`, () => inner.savepoint!(this.#rawOf(conn), name, compile));
  }

  async rollbackToSavepoint(conn: DatabaseConnection, name: string, compile: Parameters<NonNullable<Driver["savepoint"]>>[2]): Promise<void> {
    const inner = this.#inner;
    if (!inner.rollbackToSavepoint) throw new Error("the wrapped driver has no savepoints");
    return this.#gate(`rollback to ${name}`, () => inner.rollbackToSavepoint!(this.#rawOf(conn), name, compile));
  }

  async releaseSavepoint(conn: DatabaseConnection, name: string, compile: Parameters<NonNullable<Driver["savepoint"]>>[2]): Promise<void> {
    const inner = this.#inner;
    if (!inner.releaseSavepoint) throw new Error("the wrapped driver has no savepoints");
    return this.#gate(`release ${name}`, () => inner.releaseSavepoint!(this.#rawOf(conn), name, compile));
  }

  releaseConnection(conn: DatabaseConnection): Promise<void> {
    return this.#inner.releaseConnection(this.#rawOf(conn));
  }

  destroy(): Promise<void> {
    return this.#inner.destroy();
  }
}

class GatedConnection implements DatabaseConnection {
  readonly #raw: DatabaseConnection;
  readonly #options: ScheduledDialectOptions;

  constructor(raw: DatabaseConnection, options: ScheduledDialectOptions) {
    this.#raw = raw;
    this.#options = options;
  }

  executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const describe = this.#options.describe ?? defaultDescribe;
    return this.#options.scheduler.gate(this.#options.connection, describe(query), () => this.#raw.executeQuery<R>(query));
  }

  streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    return this.#raw.streamQuery<R>(query, chunkSize);
  }
}
