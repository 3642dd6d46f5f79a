import { Kysely, sql, type Dialect, type KyselyPlugin } from "kysely";
import { AdapterError, DocketError, SchemaMissingError, SchemaTooNewError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import { TRANSITIONS, type TransitionEvent } from "../../core/transitions.ts";
import { rowToRecord, type JobRow } from "./row.ts";
import { tableNames, type TableNames } from "./identifiers.ts";

/**
 * An instrumentation seam shared by every adapter: wrap the kysely dialect
 * (tracing, or docket/testing's scheduled dialect that interleaves
 * statements) and add kysely plugins. Default: none. It never changes what
 * the adapter guarantees unless a plugin rewrites queries, which only
 * docket/testing's mutation switch does, on purpose.
 */
export interface InstrumentOptions {
  wrapDialect?: (dialect: Dialect) => Dialect;
  plugins?: KyselyPlugin[];
}

/** A kysely instance for `dialect`, with the instrumentation applied. */
export function createKysely(dialect: Dialect, instrument: InstrumentOptions | undefined): AnyDb {
  return new Kysely({
    dialect: instrument?.wrapDialect ? instrument.wrapDialect(dialect) : dialect,
    plugins: instrument?.plugins ?? [],
  });
}

/** One schema version: statements applied in order, under the migration lock. */
export interface Migration {
  readonly version: number;
  readonly statements: readonly string[];
}

// deno-lint-ignore no-explicit-any
export type AnyDb = Kysely<any>;

/** The key of a guarded write: which job, which lease, at what time. */
export interface GuardKey {
  id?: number;
  leaseToken?: string;
  now: number;
}

/**
 * The bottom layer of the shared kysely implementation: connection
 * ownership, capabilities, error mapping, migrations, and the one guarded
 * write (`guard` + `applyTransition`) every state change goes through. Each
 * dialect supplies its transactions, its migration lock, its migrations and
 * its error mapping, and declares what its engine supports through the
 * capability getters; no layer tests a dialect's name.
 */
export abstract class AdapterBase {
  abstract readonly name: string;
  protected readonly tables: TableNames;
  protected readonly db: AnyDb;
  readonly #ownsDb: boolean;
  readonly #errorListeners = new Set<(error: DocketError) => void>();
  #closed = false;

  constructor(db: AnyDb, tablePrefix: string, ownsDb: boolean) {
    this.db = db;
    this.tables = tableNames(tablePrefix);
    this.#ownsDb = ownsDb;
  }

  /**
   * `UPDATE/INSERT … RETURNING`. Default false: the adapter writes, then
   * reads the rows back inside the same transaction.
   */
  get supportsReturning(): boolean {
    return false;
  }

  /**
   * `SELECT … FOR UPDATE SKIP LOCKED`: claims and purges pass over rows
   * another transaction holds. Default false, which is only correct for an
   * engine with a single writer (every write transaction serialized).
   */
  get supportsSkipLocked(): boolean {
    return false;
  }

  /**
   * Row locks (`SELECT … FOR UPDATE`, and a shared lock, see `shareLock`):
   * key, control and outcome rows are locked before they are counted or
   * written. Default false, which is only correct for a single writer.
   */
  get supportsRowLocks(): boolean {
    return false;
  }

  /**
   * A claim as one statement: `WITH … UPDATE … WHERE id IN (SELECT … LIMIT n
   * [FOR UPDATE SKIP LOCKED]) RETURNING *`, atomic on its own. Default false.
   */
  get supportsClaimStatement(): boolean {
    return false;
  }

  /** `x = ANY(ARRAY(SELECT …))` (PostgreSQL). Default false: `x IN (SELECT …)`. */
  get supportsAnyArray(): boolean {
    return false;
  }

  /**
   * Adds a shared row lock to a SELECT (a writer of the row waits for it,
   * other shared lockers do not). Only called when `supportsRowLocks`.
   * Default: `FOR SHARE`.
   */
  // deno-lint-ignore no-explicit-any
  protected shareLock<Q>(query: Q): Q {
    return (query as any).forShare();
  }

  /**
   * `INSERT … ON CONFLICT (…) DO UPDATE` (PostgreSQL, SQLite). Default true;
   * false means MySQL's `INSERT … ON DUPLICATE KEY UPDATE`.
   */
  get supportsOnConflict(): boolean {
    return true;
  }

  /**
   * Without RETURNING: the id step between the rows of one multi-row INSERT
   * when the engine gives them consecutive ids (first = the statement's
   * insert id), or null to insert one row per statement. Default null.
   */
  protected async consecutiveInsertIds(_db: AnyDb): Promise<number | null> {
    return null;
  }

  /** The schema versions, oldest first; the same numbers in every dialect. */
  protected abstract migrations(): readonly Migration[];

  /** Runs `fn` in ONE write transaction: all of its writes commit or none does. */
  protected abstract writeTransaction<T>(fn: (db: AnyDb) => Promise<T>): Promise<T>;

  /**
   * Runs a write that is one statement, or several when the engine lacks
   * RETURNING. Default: a write transaction. An engine whose single statement
   * is atomic on its own may override it to skip BEGIN/COMMIT.
   */
  protected writeStatement<T>(fn: (db: AnyDb) => Promise<T>): Promise<T> {
    return this.writeTransaction(fn);
  }

  /** Runs `fn` while holding a lock that serializes migrations across processes. */
  protected abstract withMigrationLock<T>(fn: (db: AnyDb) => Promise<T>): Promise<T>;

  /** See DocketAdapter.onError. */
  onError(listener: (error: DocketError) => void): () => void {
    this.#errorListeners.add(listener);
    return () => void this.#errorListeners.delete(listener);
  }

  /** Hands an error that happened outside any call to every `onError` listener; never throws. */
  protected reportBackgroundError(error: unknown): void {
    const mapped = this.toDocketError(error);
    for (const listener of this.#errorListeners) {
      try {
        listener(mapped);
      } catch {
        // A listener's failure must not turn a handled error into an unhandled one.
      }
    }
  }

  /**
   * Tells other processes' workers that jobs became ready (or due) in these
   * queues, inside the caller's transaction (delivered on commit). Default:
   * nothing; PostgreSQL sends NOTIFY.
   */
  protected async announceReady(_db: AnyDb, _notices: readonly { queue: string; due: boolean }[]): Promise<void> {}

  /** Closes what the dialect opened beyond the kysely instance. */
  protected async closeExtra(): Promise<void> {}

  /**
   * The table an error says does not exist, or null when it says something
   * else. Each dialect reads its own error codes; default: never.
   */
  protected missingTable(_error: unknown): string | null {
    return null;
  }

  /**
   * Maps any thrown value to a DocketError: a missing table becomes
   * SchemaMissingError, other native errors AdapterError; both keep the
   * native error as `cause`.
   */
  protected toDocketError(error: unknown): DocketError {
    if (error instanceof DocketError) return error;
    const missing = this.missingTable(error);
    if (missing !== null) return new SchemaMissingError(missing, { cause: error });
    const message = error instanceof Error ? error.message : String(error);
    return new AdapterError(`${this.name}: ${message}`, { cause: error });
  }

  protected async guardErrors<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      throw this.toDocketError(error);
    }
  }

  async migrate(): Promise<{ applied: number[]; version: number }> {
    return this.guardErrors(() =>
      this.withMigrationLock(async (db) => {
        await sql`create table if not exists ${sql.table(this.tables.migrations)} (version integer primary key)`.execute(db);
        const rows = await db.selectFrom(this.tables.migrations).select("version").execute();
        const current = rows.reduce((max, r) => Math.max(max, Number(r.version)), 0);
        const all = this.migrations();
        const latest = all.length === 0 ? 0 : all[all.length - 1]!.version;
        if (current > latest) throw new SchemaTooNewError(current, latest);
        const applied: number[] = [];
        for (const m of all) {
          if (m.version <= current) continue;
          for (const statement of m.statements) await sql.raw(statement).execute(db);
          await db.insertInto(this.tables.migrations).values({ version: m.version }).execute();
          applied.push(m.version);
        }
        return { applied, version: Math.max(current, latest) };
      }),
    );
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsDb) await this.db.destroy();
    await this.closeExtra();
  }

  /**
   * The one guarded write: `UPDATE jobs SET state = rule.to, … WHERE id = ?
   * AND state IN (rule.from) AND <fence>`, inside the caller's transaction.
   * Returns the updated record, or null when no row matched (the caller lost
   * a race or the move is illegal). With `unkeyedOnly`, a job that has a
   * concurrency key matches nothing either.
   */
  protected async applyTransition(
    db: AnyDb,
    event: TransitionEvent,
    key: GuardKey & { id: number },
    set: Record<string, unknown>,
    options: { unkeyedOnly?: boolean } = {},
  ): Promise<JobRecord | null> {
    const values = { ...set, state: TRANSITIONS[event].to, updated_at: key.now };
    let update = this.guard(db.updateTable(this.tables.jobs).set(values), event, key);
    if (options.unkeyedOnly) update = update.where("concurrency_key", "is", null);
    if (this.supportsReturning) {
      const row = (await update.returningAll().executeTakeFirst()) as JobRow | undefined;
      return row ? rowToRecord(row) : null;
    }
    const result = await update.executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) return null;
    const row = (await db.selectFrom(this.tables.jobs).selectAll().where("id", "=", key.id).executeTakeFirst()) as JobRow | undefined;
    return row ? rowToRecord(row) : null;
  }

  /**
   * Adds the WHERE clause that the core transition table prescribes for
   * `event`: the job id (when given), the legal predecessor states and the
   * rule's fence.
   */
  // deno-lint-ignore no-explicit-any
  protected guard<Q extends { where: (...args: any[]) => any }>(query: Q, event: TransitionEvent, key: GuardKey): Q {
    const rule = TRANSITIONS[event];
    let q = query;
    if (key.id !== undefined) q = q.where("id", "=", key.id);
    q = q.where("state", "in", rule.from);
    switch (rule.fence) {
      case "none":
        break;
      case "due":
        q = q.where("run_at", "<=", key.now);
        break;
      case "lease":
        q = q.where("lease_token", "=", requireToken(key, event));
        break;
      case "expired":
        q = q.where("lease_token", "=", requireToken(key, event)).where("lease_expires_at", "<=", key.now);
        break;
    }
    return q;
  }
}

/**
 * Adds the WHERE clause of `event` for many jobs at once: `id IN (…) AND
 * (id, lease_token) IN ((…), …)` and the legal predecessor states. Only for lease-fenced events.
 */
// deno-lint-ignore no-explicit-any
export function guardMany<Q extends { where: (...args: any[]) => any }>(query: Q, event: TransitionEvent, keys: readonly { id: number; leaseToken: string }[]): Q {
  const rule = TRANSITIONS[event];
  if (rule.fence !== "lease") throw new AdapterError(`${event} is not fenced by a lease`);
  return query
    // The plain id list lets planners use one primary-key lookup; the pairs are the fence.
    .where("id", "in", [...new Set(keys.map((k) => k.id))])
    // deno-lint-ignore no-explicit-any
    .where((eb: any) => eb(eb.refTuple("id", "lease_token"), "in", keys.map((k) => eb.tuple(k.id, k.leaseToken))))
    .where("state", "in", rule.from);
}

function requireToken(key: GuardKey, event: TransitionEvent): string {
  if (typeof key.leaseToken !== "string") throw new AdapterError(`${event} needs a lease token`);
  return key.leaseToken;
}
