import type { CompiledQuery, DatabaseConnection, Dialect, Driver, QueryResult, TransactionSettings } from "kysely";

/**
 * Counts what an adapter sends to its database: every statement, and
 * transaction control (BEGIN, COMMIT, ROLLBACK) whether the driver issues it
 * or the adapter does as SQL. Install with `instrument: { wrapDialect: (d) => counter.wrap(d) }`.
 * It never changes a statement or its timing beyond the count.
 */
export class StatementCounter {
  statements = 0;
  commits = 0;

  reset(): void {
    this.statements = 0;
    this.commits = 0;
  }

  wrap(dialect: Dialect): Dialect {
    const counter = this;
    return {
      createAdapter: () => dialect.createAdapter(),
      createIntrospector: (db) => dialect.createIntrospector(db),
      createQueryCompiler: () => dialect.createQueryCompiler(),
      createDriver: () => new CountingDriver(dialect.createDriver(), counter),
    };
  }

  /** Called for each statement sent. */
  count(sql: string): void {
    this.statements++;
    if (/^\s*commit\b/i.test(sql)) this.commits++;
  }
}

class CountingDriver implements Driver {
  readonly #inner: Driver;
  readonly #counter: StatementCounter;
  readonly #raw = new WeakMap<DatabaseConnection, DatabaseConnection>();

  constructor(inner: Driver, counter: StatementCounter) {
    this.#inner = inner;
    this.#counter = counter;
  }

  init(): Promise<void> {
    return this.#inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const raw = await this.#inner.acquireConnection();
    const counter = this.#counter;
    const wrapped: DatabaseConnection = {
      executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
        counter.count(compiled.sql);
        return raw.executeQuery<R>(compiled);
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
    this.#counter.count("begin");
    return this.#inner.beginTransaction(this.#rawOf(c), settings);
  }

  commitTransaction(c: DatabaseConnection): Promise<void> {
    this.#counter.count("commit");
    return this.#inner.commitTransaction(this.#rawOf(c));
  }

  rollbackTransaction(c: DatabaseConnection): Promise<void> {
    this.#counter.count("rollback");
    return this.#inner.rollbackTransaction(this.#rawOf(c));
  }

  releaseConnection(c: DatabaseConnection): Promise<void> {
    return this.#inner.releaseConnection(this.#rawOf(c));
  }

  destroy(): Promise<void> {
    return this.#inner.destroy();
  }
}
