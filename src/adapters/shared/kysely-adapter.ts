import { Kysely, sql, type Dialect, type ExpressionBuilder, type KyselyPlugin } from "kysely";
import type {
  ClaimParams,
  DocketAdapter,
  EnqueueParams,
  FailParams,
  FencedParams,
  HeartbeatParams,
  ListParams,
} from "../../core/adapter.ts";
import { AdapterError, DocketError, SchemaTooNewError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import { TRANSITIONS, type TransitionEvent } from "../../core/transitions.ts";
import { byClaimOrder, rowToRecord, type JobRow } from "./row.ts";
import { tableNames } from "./identifiers.ts";

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
interface GuardKey {
  id?: number;
  leaseToken?: string;
  now: number;
}

/**
 * The shared kysely implementation of the adapter contract. Each dialect
 * subclass supplies its transactions, its migration lock, its migrations and
 * its error mapping, and declares what its engine supports through the
 * capability getters; this class never tests a dialect's name.
 */
export abstract class KyselyAdapter implements DocketAdapter {
  abstract readonly name: string;
  protected readonly tables: { jobs: string; migrations: string };
  protected readonly db: AnyDb;
  readonly #ownsDb: boolean;
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
   * `SELECT … FOR UPDATE SKIP LOCKED`. Default false, which is only correct
   * for an engine with a single writer (every write transaction serialized).
   */
  get supportsSkipLocked(): boolean {
    return false;
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

  /** Closes what the dialect opened beyond the kysely instance. */
  protected async closeExtra(): Promise<void> {}

  /** Maps any thrown value to a DocketError; native errors become AdapterError with `cause`. */
  protected toDocketError(error: unknown): DocketError {
    if (error instanceof DocketError) return error;
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

  async enqueue(params: EnqueueParams): Promise<JobRecord[]> {
    if (params.jobs.length === 0) return [];
    const values = params.jobs.map((j) => ({
      task: j.task,
      queue: j.queue,
      payload: j.payload,
      state: j.state,
      priority: j.priority,
      run_at: j.runAt,
      attempt: 0,
      max_attempts: j.maxAttempts,
      backoff: j.backoff,
      created_at: params.now,
      updated_at: params.now,
    }));
    return this.guardErrors(() =>
      this.writeTransaction(async (db) => {
        const rows: JobRow[] = [];
        if (this.supportsReturning) {
          for (let i = 0; i < values.length; i += 500) {
            const chunk = values.slice(i, i + 500);
            const inserted = (await db.insertInto(this.tables.jobs).values(chunk).returningAll().execute()) as JobRow[];
            rows.push(...inserted.sort((a, b) => Number(a.id) - Number(b.id)));
          }
        } else {
          const ids: number[] = [];
          for (const v of values) {
            const res = await db.insertInto(this.tables.jobs).values(v).executeTakeFirstOrThrow();
            ids.push(Number(res.insertId));
          }
          for (let i = 0; i < ids.length; i += 500) {
            const chunk = ids.slice(i, i + 500);
            const got = (await db.selectFrom(this.tables.jobs).selectAll().where("id", "in", chunk).orderBy("id").execute()) as JobRow[];
            rows.push(...got);
          }
        }
        if (rows.length !== values.length) throw new AdapterError(`${this.name}: inserted ${rows.length} of ${values.length} jobs`);
        return rows.map(rowToRecord);
      }),
    );
  }

  async claim(params: ClaimParams): Promise<JobRecord[]> {
    if (params.limit <= 0 || params.queues.length === 0) return [];
    const rule = TRANSITIONS.claim;
    const set = {
      state: rule.to,
      attempt: sql`attempt + 1`,
      lease_token: params.leaseToken,
      lease_expires_at: params.leaseExpiresAt,
      updated_at: params.now,
    };
    return this.guardErrors(() =>
      this.writeTransaction(async (db) => {
        let candidates = this.guard(db.selectFrom(this.tables.jobs).select("id"), "claim", { now: params.now })
          .where("queue", "in", params.queues)
          .orderBy("priority")
          .orderBy("run_at")
          .orderBy("id")
          .limit(params.limit);
        if (this.supportsSkipLocked) candidates = candidates.forUpdate().skipLocked();
        let rows: JobRow[];
        if (this.supportsReturning) {
          // The candidates go through a MATERIALIZED CTE: as a plain `IN (subquery)`, PostgreSQL may
          // re-evaluate the LIMITed, SKIP LOCKED subquery and claim more than `limit` rows.
          const update = db
            .with((cte) => cte("picked").materialized(), () => candidates)
            .updateTable(this.tables.jobs)
            .set(set)
            .where("id", "in", (eb: ExpressionBuilder<any, any>) => eb.selectFrom("picked").select("id"));
          rows = (await this.guard(update, "claim", { now: params.now }).returningAll().execute()) as JobRow[];
        } else {
          const ids = (await candidates.execute()).map((r) => Number(r.id));
          if (ids.length === 0) return [];
          const update = db.updateTable(this.tables.jobs).set(set).where("id", "in", ids);
          await this.guard(update, "claim", { now: params.now }).execute();
          rows = (await db
            .selectFrom(this.tables.jobs)
            .selectAll()
            .where("id", "in", ids)
            .where("lease_token", "=", params.leaseToken)
            .execute()) as JobRow[];
        }
        return rows.map(rowToRecord).sort(byClaimOrder);
      }),
    );
  }

  heartbeat(params: HeartbeatParams): Promise<JobRecord | null> {
    return this.transition("heartbeat", params, { lease_expires_at: params.leaseExpiresAt });
  }

  complete(params: FencedParams): Promise<JobRecord | null> {
    return this.transition("complete", params, { ...CLEAR_LEASE, finished_at: params.now });
  }

  fail(params: FailParams): Promise<JobRecord | null> {
    return this.failLike(params, "retry", "bury");
  }

  release(params: FencedParams): Promise<JobRecord | null> {
    return this.transition("release", params, { ...CLEAR_LEASE, attempt: sql`attempt - 1` });
  }

  async listExpired(params: { now: number; limit: number }): Promise<JobRecord[]> {
    return this.guardErrors(async () => {
      const rows = (await this.db
        .selectFrom(this.tables.jobs)
        .selectAll()
        .where("state", "in", TRANSITIONS.expireRetry.from)
        .where("lease_expires_at", "<=", params.now)
        .orderBy("lease_expires_at")
        .orderBy("id")
        .limit(params.limit)
        .execute()) as JobRow[];
      return rows.map(rowToRecord);
    });
  }

  expire(params: FailParams): Promise<JobRecord | null> {
    return this.failLike(params, "expireRetry", "expireBury");
  }

  cancel(params: { id: number; now: number }): Promise<JobRecord | null> {
    return this.transition("cancel", params, { ...CLEAR_LEASE, finished_at: params.now });
  }

  replay(params: { id: number; now: number }): Promise<JobRecord | null> {
    return this.transition("replay", params, { attempt: 0, run_at: params.now, finished_at: null });
  }

  async get(params: { id: number }): Promise<JobRecord | null> {
    return this.guardErrors(async () => {
      const row = (await this.db.selectFrom(this.tables.jobs).selectAll().where("id", "=", params.id).executeTakeFirst()) as
        | JobRow
        | undefined;
      return row ? rowToRecord(row) : null;
    });
  }

  async list(params: ListParams): Promise<JobRecord[]> {
    return this.guardErrors(async () => {
      let q = this.db.selectFrom(this.tables.jobs).selectAll();
      if (params.state !== undefined) q = q.where("state", "=", params.state);
      if (params.queue !== undefined) q = q.where("queue", "=", params.queue);
      if (params.task !== undefined) q = q.where("task", "=", params.task);
      if (params.afterId !== undefined) q = q.where("id", ">", params.afterId);
      const rows = (await q.orderBy("id").limit(params.limit).execute()) as JobRow[];
      return rows.map(rowToRecord);
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#ownsDb) await this.db.destroy();
    await this.closeExtra();
  }

  private failLike(params: FailParams, retry: TransitionEvent, bury: TransitionEvent): Promise<JobRecord | null> {
    const error = { ...CLEAR_LEASE, last_error: params.error };
    return params.retryAt === null
      ? this.transition(bury, params, { ...error, finished_at: params.now })
      : this.transition(retry, params, { ...error, run_at: params.retryAt });
  }

  /**
   * The one guarded write: `UPDATE jobs SET state = rule.to, … WHERE id = ?
   * AND state IN (rule.from) AND <fence>`. Returns the updated record, or
   * null when no row matched (the caller lost a race or the move is illegal).
   */
  protected transition(event: TransitionEvent, key: GuardKey & { id: number }, set: Record<string, unknown>): Promise<JobRecord | null> {
    const values = { ...set, state: TRANSITIONS[event].to, updated_at: key.now };
    return this.guardErrors(() =>
      this.writeStatement(async (db) => {
        const update = this.guard(db.updateTable(this.tables.jobs).set(values), event, key);
        if (this.supportsReturning) {
          const row = (await update.returningAll().executeTakeFirst()) as JobRow | undefined;
          return row ? rowToRecord(row) : null;
        }
        const result = await update.executeTakeFirst();
        if (Number(result.numUpdatedRows) === 0) return null;
        const row = (await db.selectFrom(this.tables.jobs).selectAll().where("id", "=", key.id).executeTakeFirst()) as
          | JobRow
          | undefined;
        return row ? rowToRecord(row) : null;
      }),
    );
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

const CLEAR_LEASE = { lease_token: null, lease_expires_at: null } as const;

function requireToken(key: GuardKey, event: TransitionEvent): string {
  if (typeof key.leaseToken !== "string") throw new AdapterError(`${event} needs a lease token`);
  return key.leaseToken;
}
