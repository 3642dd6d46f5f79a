import type { CompiledQuery, DatabaseConnection, Dialect, Driver, QueryResult, TransactionSettings } from "kysely";

/** A statement held at a hook: resolve `reached` first, then `release` or `crash` it. */
export interface HeldStatement {
  /** Resolves when a matching statement arrives and is held. */
  readonly reached: Promise<string>;
  /** Lets the held statement run. */
  release(): void;
  /** Makes the held statement fail, so its transaction rolls back, as if its process died there. */
  crash(error?: Error): void;
}

/**
 * Deterministic two-session races: wraps a dialect so that the next
 * statement matching a pattern is held before it is sent, keeping its
 * session's transaction open at that point while another session runs.
 * Only the wrapped adapter's statements are held. Transaction control
 * (begin/commit) is never held.
 */
export class StatementHook {
  #armed: { pattern: RegExp; arrive: (sql: string) => void; gate: Promise<void> }[] = [];

  /** Holds the next statement whose SQL matches `pattern` (case-insensitive match on the compiled SQL). */
  holdNext(pattern: RegExp): HeldStatement {
    let arrive!: (sql: string) => void;
    let release!: () => void;
    let crash!: (e: Error) => void;
    const reached = new Promise<string>((r) => (arrive = r));
    const gate = new Promise<void>((res, rej) => {
      release = res;
      crash = rej;
    });
    gate.catch(() => undefined);
    this.#armed.push({ pattern, arrive, gate });
    return { reached, release: () => release(), crash: (e = new Error("simulated crash")) => crash(e) };
  }

  wrap(dialect: Dialect): Dialect {
    const hook = this;
    return {
      createAdapter: () => dialect.createAdapter(),
      createIntrospector: (db) => dialect.createIntrospector(db),
      createQueryCompiler: () => dialect.createQueryCompiler(),
      createDriver: () => new HookedDriver(dialect.createDriver(), (sql) => hook.#wait(sql)),
    };
  }

  async #wait(sql: string): Promise<void> {
    const i = this.#armed.findIndex((a) => a.pattern.test(sql));
    if (i < 0) return;
    const [armed] = this.#armed.splice(i, 1);
    armed!.arrive(sql);
    await armed!.gate;
  }
}

class HookedDriver implements Driver {
  readonly #inner: Driver;
  readonly #wait: (sql: string) => Promise<void>;
  readonly #raw = new WeakMap<DatabaseConnection, DatabaseConnection>();

  constructor(inner: Driver, wait: (sql: string) => Promise<void>) {
    this.#inner = inner;
    this.#wait = wait;
  }

  init(): Promise<void> {
    return this.#inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const raw = await this.#inner.acquireConnection();
    const wait = this.#wait;
    const wrapped: DatabaseConnection = {
      async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
        await wait(compiled.sql);
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
    return this.#inner.beginTransaction(this.#rawOf(c), settings);
  }

  commitTransaction(c: DatabaseConnection): Promise<void> {
    return this.#inner.commitTransaction(this.#rawOf(c));
  }

  rollbackTransaction(c: DatabaseConnection): Promise<void> {
    return this.#inner.rollbackTransaction(this.#rawOf(c));
  }

  releaseConnection(c: DatabaseConnection): Promise<void> {
    return this.#inner.releaseConnection(this.#rawOf(c));
  }

  destroy(): Promise<void> {
    return this.#inner.destroy();
  }
}
