import type { CompiledQuery, DatabaseConnection, Dialect, Driver, QueryResult, TransactionSettings } from "kysely";

/** What a tap sees of a driver's traffic. */
export interface DriverTap {
  /** Called before each statement is sent, with its parameters; the statement waits for the returned promise. */
  query?(sql: string, parameters: readonly unknown[]): void | Promise<void>;
  /** Called after each statement ran, before its result is returned; the caller waits for the returned promise. */
  after?(sql: string): void | Promise<void>;
  /** Called for transaction control the driver issues itself. */
  control?(kind: "begin" | "commit" | "rollback"): void;
}

/**
 * `dialect` with every connection's statements passed through `tap` first.
 * Never changes a statement or its result; the tap decides only when it is
 * sent (a promise it returns holds it).
 */
export function tapDialect(dialect: Dialect, tap: DriverTap): Dialect {
  return {
    createAdapter: () => dialect.createAdapter(),
    createIntrospector: (db) => dialect.createIntrospector(db),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createDriver: () => new TappedDriver(dialect.createDriver(), tap),
  };
}

class TappedDriver implements Driver {
  readonly #inner: Driver;
  readonly #tap: DriverTap;
  readonly #raw = new WeakMap<DatabaseConnection, DatabaseConnection>();

  constructor(inner: Driver, tap: DriverTap) {
    this.#inner = inner;
    this.#tap = tap;
  }

  init(): Promise<void> {
    return this.#inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const raw = await this.#inner.acquireConnection();
    const tap = this.#tap;
    const wrapped: DatabaseConnection = {
      async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
        await tap.query?.(compiled.sql, compiled.parameters);
        const result = await raw.executeQuery<R>(compiled);
        await tap.after?.(compiled.sql);
        return result;
      },
      streamQuery: <R>(compiled: CompiledQuery, chunkSize?: number) => raw.streamQuery<R>(compiled, chunkSize),
    };
    this.#raw.set(wrapped, raw);
    return wrapped;
  }

  #rawOf(c: DatabaseConnection): DatabaseConnection {
    return this.#raw.get(c) ?? c;
  }

  beginTransaction(c: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    this.#tap.control?.("begin");
    return this.#inner.beginTransaction(this.#rawOf(c), settings);
  }

  commitTransaction(c: DatabaseConnection): Promise<void> {
    this.#tap.control?.("commit");
    return this.#inner.commitTransaction(this.#rawOf(c));
  }

  rollbackTransaction(c: DatabaseConnection): Promise<void> {
    this.#tap.control?.("rollback");
    return this.#inner.rollbackTransaction(this.#rawOf(c));
  }

  releaseConnection(c: DatabaseConnection): Promise<void> {
    return this.#inner.releaseConnection(this.#rawOf(c));
  }

  destroy(): Promise<void> {
    return this.#inner.destroy();
  }
}
