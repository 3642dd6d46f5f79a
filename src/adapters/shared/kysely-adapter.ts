import { Kysely, sql, type Dialect, type ExpressionBuilder, type KyselyPlugin } from "kysely";
import type {
  ClaimParams,
  DocketAdapter,
  EnqueueParams,
  FailParams,
  FencedParams,
  HeartbeatParams,
  ListParams,
  QueueControl,
  TaskControl,
} from "../../core/adapter.ts";
import { AdapterError, DocketError, SchemaTooNewError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import { TRANSITIONS, freesSlot, type TransitionEvent } from "../../core/transitions.ts";
import { SLOT_HOLDING_STATES, type JobState } from "../../core/states.ts";
import { admit, freeSlots } from "../../core/concurrency.ts";
import { byClaimOrder, rowToRecord, type JobRow } from "./row.ts";
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
  protected readonly tables: TableNames;
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

  /**
   * `INSERT … ON CONFLICT (…) DO UPDATE` (PostgreSQL, SQLite). Default true;
   * false means MySQL's `INSERT … ON DUPLICATE KEY UPDATE`.
   */
  get supportsOnConflict(): boolean {
    return true;
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
    const { now } = params;
    const values = params.jobs.map((j) => ({
      task: j.task,
      queue: j.queue,
      payload: j.payload,
      state: j.state as JobState,
      priority: j.priority,
      run_at: j.runAt,
      attempt: 0,
      max_attempts: j.maxAttempts,
      backoff: j.backoff,
      concurrency_key: j.concurrency?.key ?? null,
      created_at: now,
      updated_at: now,
      finished_at: null as number | null,
      last_error: null as string | null,
    }));
    const keyed = params.jobs.some((j) => j.concurrency);
    return this.guardErrors(() =>
      this.writeTransaction(async (db) => {
        if (!keyed) return this.insertRows(db, values);
        // Every key of the batch is locked up front, in name order, so concurrent batches cannot deadlock.
        const limits = new Map<string, number>();
        for (const j of params.jobs) if (j.concurrency) limits.set(j.concurrency.key, j.concurrency.limit);
        for (const name of [...limits.keys()].sort()) {
          await this.lockKey(db, name, limits.get(name)!);
          await this.rebalance(db, name, now);
        }
        const records: JobRecord[] = [];
        for (const [i, job] of params.jobs.entries()) {
          const row = values[i]!;
          if (job.concurrency && job.state === "ready") {
            const holders = await this.countHolders(db, job.concurrency.key);
            const decision = admit(holders, job.concurrency.limit, job.concurrency.onConflict);
            if (decision === "blocked") row.state = "blocked";
            if (decision === "discarded") {
              row.state = "cancelled";
              row.finished_at = now;
              row.last_error = `discarded: concurrency key ${JSON.stringify(job.concurrency.key)} is full (limit ${job.concurrency.limit})`;
            }
          }
          records.push(...(await this.insertRows(db, [row])));
        }
        return records;
      }),
    );
  }

  /** Inserts rows (in this order) and returns their records; inside the caller's transaction. */
  private async insertRows(db: AnyDb, values: Record<string, unknown>[]): Promise<JobRecord[]> {
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
        rows.push(...((await db.selectFrom(this.tables.jobs).selectAll().where("id", "in", chunk).orderBy("id").execute()) as JobRow[]));
      }
    }
    if (rows.length !== values.length) throw new AdapterError(`${this.name}: inserted ${rows.length} of ${values.length} jobs`);
    return rows.map(rowToRecord);
  }

  async claim(params: ClaimParams): Promise<JobRecord[]> {
    if (params.limit <= 0 || params.queues.length === 0) return [];
    await this.guardErrors(() => this.stageDue(params.now));
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
        // Queue controls first, locked in name order: a pause or cap change waits for this claim, and vice versa.
        let controls = db
          .selectFrom(this.tables.queues)
          .select(["name", "paused", "max_running"])
          .where("name", "in", [...params.queues])
          .orderBy("name");
        if (this.supportsSkipLocked) controls = controls.forUpdate();
        const queueRows = (await controls.execute()) as { name: string; paused: number | boolean; max_running: number | null }[];
        const paused = new Set(queueRows.filter((r) => Number(r.paused) === 1).map((r) => r.name));
        const capped = new Map(queueRows.filter((r) => r.max_running !== null && !paused.has(r.name)).map((r) => [r.name, Number(r.max_running)]));
        const uncapped = params.queues.filter((q) => !paused.has(q) && !capped.has(q));
        const groups: { queues: string[]; limit: number }[] = [];
        if (uncapped.length > 0) groups.push({ queues: uncapped, limit: params.limit });
        for (const [queue, cap] of capped) {
          const room = cap - (await this.countRunning(db, "queue", queue));
          if (room > 0) groups.push({ queues: [queue], limit: Math.min(room, params.limit) });
        }
        const candidates: { id: number; task: string; priority: number; run_at: number }[] = [];
        for (const g of groups) {
          let q = this.guard(db.selectFrom(this.tables.jobs).select(["id", "task", "priority", "run_at"]), "claim", { now: params.now })
            .where("queue", "in", g.queues)
            .orderBy("priority")
            .orderBy("run_at")
            .orderBy("id")
            .limit(g.limit);
          if (this.supportsSkipLocked) q = q.forUpdate().skipLocked();
          for (const r of await q.execute()) candidates.push({ id: Number(r.id), task: r.task, priority: Number(r.priority), run_at: Number(r.run_at) });
        }
        candidates.sort((a, b) => a.priority - b.priority || a.run_at - b.run_at || a.id - b.id);
        const taskRoom = await this.taskRoom(db, [...new Set(candidates.map((c) => c.task))]);
        const chosen: number[] = [];
        for (const c of candidates) {
          if (chosen.length >= params.limit) break;
          const room = taskRoom.get(c.task);
          if (room !== undefined) {
            if (room <= 0) continue;
            taskRoom.set(c.task, room - 1);
          }
          chosen.push(c.id);
        }
        if (chosen.length === 0) return [];
        const update = this.guard(db.updateTable(this.tables.jobs).set(set).where("id", "in", chosen), "claim", { now: params.now });
        let rows: JobRow[];
        if (this.supportsReturning) {
          rows = (await update.returningAll().execute()) as JobRow[];
        } else {
          await update.execute();
          rows = (await db
            .selectFrom(this.tables.jobs)
            .selectAll()
            .where("id", "in", chosen)
            .where("lease_token", "=", params.leaseToken)
            .execute()) as JobRow[];
        }
        return rows.map(rowToRecord).sort(byClaimOrder);
      }),
    );
  }

  /** Remaining room per capped task among `tasks`, with the task control rows locked in name order. */
  private async taskRoom(db: AnyDb, tasks: string[]): Promise<Map<string, number>> {
    const room = new Map<string, number>();
    if (tasks.length === 0) return room;
    let q = db
      .selectFrom(this.tables.tasks)
      .select(["name", "max_running"])
      .where("name", "in", tasks)
      .where("max_running", "is not", null)
      .orderBy("name");
    if (this.supportsSkipLocked) q = q.forUpdate();
    for (const r of (await q.execute()) as { name: string; max_running: number }[]) {
      room.set(r.name, Number(r.max_running) - (await this.countRunning(db, "task", r.name)));
    }
    return room;
  }

  private async countRunning(db: AnyDb, column: "queue" | "task", value: string): Promise<number> {
    const r = await db
      .selectFrom(this.tables.jobs)
      .select((eb: ExpressionBuilder<any, any>) => eb.fn.countAll().as("n"))
      .where(column, "=", value)
      .where("state", "=", "running")
      .executeTakeFirst();
    return Number(r?.n ?? 0);
  }

  /**
   * Admits due scheduled jobs: unkeyed ones straight to ready (one
   * transaction, rows other stagers hold are skipped), keyed ones per key
   * under the key's lock through `rebalance`. Reads first, so an idle poll
   * writes nothing.
   */
  private async stageDue(now: number): Promise<void> {
    const due = () =>
      this.db
        .selectFrom(this.tables.jobs)
        .where("state", "in", TRANSITIONS.stage.from)
        .where("run_at", "<=", now);
    const unkeyed = await due().select("id").where("concurrency_key", "is", null).limit(1).execute();
    if (unkeyed.length > 0) {
      await this.writeTransaction(async (db) => {
        let q = this.guard(db.selectFrom(this.tables.jobs).select("id"), "stage", { now })
          .where("concurrency_key", "is", null)
          .orderBy("run_at")
          .orderBy("id")
          .limit(1000);
        if (this.supportsSkipLocked) q = q.forUpdate().skipLocked();
        const ids = (await q.execute()).map((r) => Number(r.id));
        if (ids.length === 0) return;
        await this.guard(db.updateTable(this.tables.jobs).set({ state: TRANSITIONS.stage.to, updated_at: now }).where("id", "in", ids), "stage", {
          now,
        }).execute();
      });
    }
    const keys = await due().select("concurrency_key").distinct().where("concurrency_key", "is not", null).limit(100).execute();
    for (const { concurrency_key } of keys as { concurrency_key: string }[]) {
      await this.writeTransaction(async (db) => {
        await this.lockKey(db, concurrency_key);
        await this.rebalance(db, concurrency_key, now);
      });
    }
  }

  /**
   * Locks a concurrency key's row for the rest of the transaction, creating
   * it (or setting its limit) when `limit` is given. Every transaction that
   * changes which jobs of a key hold slots takes this lock BEFORE touching
   * the key's job rows; claim, which does not change holders, never takes it.
   */
  protected async lockKey(db: AnyDb, name: string, limit?: number): Promise<void> {
    if (limit !== undefined) {
      const insert = db.insertInto(this.tables.keys).values({ name, max_holders: limit });
      await (this.supportsOnConflict
        ? insert.onConflict((oc) => oc.column("name").doUpdateSet({ max_holders: limit }))
        : insert.onDuplicateKeyUpdate({ max_holders: limit })
      ).execute();
      return;
    }
    let q = db.selectFrom(this.tables.keys).select("name").where("name", "=", name);
    if (this.supportsSkipLocked) q = q.forUpdate();
    await q.execute();
  }

  private async countHolders(db: AnyDb, key: string): Promise<number> {
    const r = await db
      .selectFrom(this.tables.jobs)
      .select((eb: ExpressionBuilder<any, any>) => eb.fn.countAll().as("n"))
      .where("concurrency_key", "=", key)
      .where("state", "in", SLOT_HOLDING_STATES)
      .executeTakeFirst();
    return Number(r?.n ?? 0);
  }

  /**
   * Makes key `name` exact, under its lock: while it has free slots
   * (limit − holders), the next waiting jobs (blocked, or scheduled and due;
   * by priority, run_at, id) are admitted; due scheduled jobs beyond that are
   * blocked. Idempotent. Called in the same transaction as every write that
   * frees a slot, so no blocked job waits while its key has room.
   */
  protected async rebalance(db: AnyDb, name: string, now: number): Promise<void> {
    const key = (await db.selectFrom(this.tables.keys).select("max_holders").where("name", "=", name).executeTakeFirst()) as
      | { max_holders: number }
      | undefined;
    if (!key) return;
    let free = freeSlots(Number(key.max_holders), await this.countHolders(db, name));
    const waiting = (await db
      .selectFrom(this.tables.jobs)
      .select(["id", "state"])
      .where("concurrency_key", "=", name)
      .where((eb: ExpressionBuilder<any, any>) =>
        eb.or([eb("state", "in", TRANSITIONS.unblock.from), eb.and([eb("state", "in", TRANSITIONS.stage.from), eb("run_at", "<=", now)])]),
      )
      .orderBy("priority")
      .orderBy("run_at")
      .orderBy("id")
      .limit(free + 100)
      .execute()) as { id: number | string; state: JobState }[];
    for (const w of waiting) {
      const id = Number(w.id);
      if (free > 0) {
        const event = w.state === "blocked" ? "unblock" : "stage";
        if (await this.applyTransition(db, event, { id, now }, {})) free--;
      } else if (w.state === "scheduled") {
        await this.applyTransition(db, "stageBlocked", { id, now }, {});
      }
    }
  }

  async setQueueControl(params: { queue: string; paused?: boolean; maxRunning?: number | null }): Promise<QueueControl> {
    const changes: Record<string, unknown> = {};
    if (params.paused !== undefined) changes.paused = params.paused ? 1 : 0;
    if (params.maxRunning !== undefined) changes.max_running = params.maxRunning;
    return this.guardErrors(() =>
      this.writeTransaction(async (db) => {
        await this.upsert(db, this.tables.queues, { name: params.queue, paused: 0, max_running: null, ...changes }, changes);
        const row = (await db.selectFrom(this.tables.queues).selectAll().where("name", "=", params.queue).executeTakeFirstOrThrow()) as QueueRow;
        return toQueueControl(row);
      }),
    );
  }

  async setTaskControl(params: { task: string; maxRunning: number | null }): Promise<TaskControl> {
    const changes = { max_running: params.maxRunning };
    return this.guardErrors(() =>
      this.writeTransaction(async (db) => {
        await this.upsert(db, this.tables.tasks, { name: params.task, ...changes }, changes);
        return { task: params.task, maxRunning: params.maxRunning };
      }),
    );
  }

  async listControls(): Promise<{ queues: QueueControl[]; tasks: TaskControl[] }> {
    return this.guardErrors(async () => {
      const queues = (await this.db.selectFrom(this.tables.queues).selectAll().orderBy("name").execute()) as QueueRow[];
      const tasks = (await this.db.selectFrom(this.tables.tasks).selectAll().orderBy("name").execute()) as { name: string; max_running: number | null }[];
      return {
        queues: queues.map(toQueueControl),
        tasks: tasks.map((t) => ({ task: t.name, maxRunning: t.max_running === null ? null : Number(t.max_running) })),
      };
    });
  }

  /** INSERT, or on a duplicate `name` UPDATE `changes` (nothing when empty). */
  private async upsert(db: AnyDb, table: string, row: Record<string, unknown>, changes: Record<string, unknown>): Promise<void> {
    const insert = db.insertInto(table).values(row);
    const set = Object.keys(changes).length > 0 ? changes : { name: row.name };
    await (this.supportsOnConflict ? insert.onConflict((oc) => oc.column("name").doUpdateSet(set)) : insert.onDuplicateKeyUpdate(set)).execute();
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
    return this.transition("replay", params, { attempt: 0, run_at: params.now, finished_at: null, last_error: null });
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
   * A guarded write as its own unit of work. When `event` can free a
   * concurrency slot, the job's key is locked first and rebalanced in the
   * same transaction (the next blocked job is promoted before commit).
   */
  protected transition(event: TransitionEvent, key: GuardKey & { id: number }, set: Record<string, unknown>): Promise<JobRecord | null> {
    if (!freesSlot(event)) return this.guardErrors(() => this.writeStatement((db) => this.applyTransition(db, event, key, set)));
    return this.guardErrors(() =>
      this.writeTransaction(async (db) => {
        // A job's key never changes, so reading it before taking the key's lock is safe.
        const row = (await db.selectFrom(this.tables.jobs).select("concurrency_key").where("id", "=", key.id).executeTakeFirst()) as
          | { concurrency_key: string | null }
          | undefined;
        const ck = row?.concurrency_key ?? null;
        if (ck !== null) await this.lockKey(db, ck);
        const moved = await this.applyTransition(db, event, key, set);
        if (moved && ck !== null) await this.rebalance(db, ck, key.now);
        return moved;
      }),
    );
  }

  /**
   * The one guarded write: `UPDATE jobs SET state = rule.to, … WHERE id = ?
   * AND state IN (rule.from) AND <fence>`, inside the caller's transaction.
   * Returns the updated record, or null when no row matched (the caller lost
   * a race or the move is illegal).
   */
  protected async applyTransition(
    db: AnyDb,
    event: TransitionEvent,
    key: GuardKey & { id: number },
    set: Record<string, unknown>,
  ): Promise<JobRecord | null> {
    const values = { ...set, state: TRANSITIONS[event].to, updated_at: key.now };
    const update = this.guard(db.updateTable(this.tables.jobs).set(values), event, key);
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

const CLEAR_LEASE = { lease_token: null, lease_expires_at: null } as const;

interface QueueRow {
  name: string;
  paused: number | boolean;
  max_running: number | string | null;
}

function toQueueControl(r: QueueRow): QueueControl {
  return { queue: r.name, paused: Number(r.paused) === 1, maxRunning: r.max_running === null ? null : Number(r.max_running) };
}

function requireToken(key: GuardKey, event: TransitionEvent): string {
  if (typeof key.leaseToken !== "string") throw new AdapterError(`${event} needs a lease token`);
  return key.leaseToken;
}
