import { sql, type ExpressionBuilder } from "kysely";
import type {
  ClaimParams,
  DocketAdapter,
  EnqueueParams,
  FailParams,
  FencedParams,
  HeartbeatParams,
  ListParams,
  PurgeParams,
  QueueControl,
  ExtendLeasesParams,
  LeaseKey,
  SettleItem,
  SettleParams,
  SettledJob,
  TaskControl,
} from "../../core/adapter.ts";
import { AdapterError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import { TRANSITIONS, type TransitionEvent } from "../../core/transitions.ts";
import { TERMINAL_STATES, type JobState } from "../../core/states.ts";
import { admit, discardReason } from "../../core/concurrency.ts";
import { SETTLED_COLUMNS, inClaimOrder, rowToRecord, rowToSettled, type JobRow, type SettledRow } from "./row.ts";
import { byClaimOrder, takeWithinCaps, type ClaimCandidate } from "../../core/claim-order.ts";
import { guardMany, type AnyDb } from "./base.ts";
import { SlotAdapter } from "./slots.ts";

export { createKysely, type AnyDb, type InstrumentOptions, type Migration } from "./base.ts";

/**
 * The shared kysely implementation of the adapter contract (see
 * core/adapter.ts): enqueue with admission, claims with pause and caps, the
 * public transitions and reads. The layers below hold the guarded write
 * (`AdapterBase`) and the concurrency-key slots (`SlotAdapter`).
 */
export abstract class KyselyAdapter extends SlotAdapter implements DocketAdapter {
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
      on_conflict: j.concurrency?.onConflict ?? null,
      timeout_ms: j.timeoutMs ?? null,
      created_at: now,
      updated_at: now,
      finished_at: null as number | null,
      last_error: null as string | null,
    }));
    const keyed = params.jobs.some((j) => j.concurrency);
    if (!keyed && values.length <= BATCH_ROWS && this.supportsReturning) {
      // One INSERT … RETURNING is atomic on its own: no transaction (on PostgreSQL, no BEGIN/COMMIT round trips).
      return this.guardErrors(async () => {
        const records = await this.writeStatement((db) => this.insertRows(db, values));
        // The jobs are stored: the notice is sent without holding up the caller, and one that fails is
        // reported, not thrown (workers still find the jobs by polling).
        void this.announceReady(this.db, readyQueues(records)).catch((error) => this.reportBackgroundError(error));
        return records;
      });
    }
    return this.guardErrors(() =>
      this.writeTransaction(async (db) => {
        const records = await this.insertAdmitted(db, params, values, keyed);
        await this.announceReady(db, readyQueues(records));
        return records;
      }),
    );
  }

  /** The insert of `enqueue`, inside its transaction: admission under each key's lock, then the rows. */
  private async insertAdmitted(db: AnyDb, params: EnqueueParams, values: Record<string, unknown>[], keyed: boolean): Promise<JobRecord[]> {
    const { now } = params;
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
          row.last_error = discardReason(job.concurrency.key, job.concurrency.limit);
        }
      }
      records.push(...(await this.insertRows(db, [row])));
    }
    return records;
  }

  /** Inserts rows (in this order) and returns their records; inside the caller's transaction. */
  private async insertRows(db: AnyDb, values: Record<string, unknown>[]): Promise<JobRecord[]> {
    const rows: JobRow[] = [];
    if (this.supportsReturning) {
      for (let i = 0; i < values.length; i += BATCH_ROWS) {
        const chunk = values.slice(i, i + BATCH_ROWS);
        const inserted = (await db.insertInto(this.tables.jobs).values(chunk).returningAll().execute()) as JobRow[];
        rows.push(...inserted.sort((a, b) => Number(a.id) - Number(b.id)));
      }
    } else {
      const step = await this.consecutiveInsertIds(db);
      const ids: number[] = [];
      if (step !== null) {
        // One multi-row INSERT per chunk: its rows get ids first, first + step, … (see consecutiveInsertIds).
        for (let i = 0; i < values.length; i += BATCH_ROWS) {
          const chunk = values.slice(i, i + BATCH_ROWS);
          const first = Number((await db.insertInto(this.tables.jobs).values(chunk).executeTakeFirstOrThrow()).insertId);
          for (let k = 0; k < chunk.length; k++) ids.push(first + k * step);
        }
      } else {
        for (const v of values) {
          const res = await db.insertInto(this.tables.jobs).values(v).executeTakeFirstOrThrow();
          ids.push(Number(res.insertId));
        }
      }
      for (let i = 0; i < ids.length; i += BATCH_ROWS) {
        const chunk = ids.slice(i, i + BATCH_ROWS);
        rows.push(...((await db.selectFrom(this.tables.jobs).selectAll().where("id", "in", chunk).orderBy("id").execute()) as JobRow[]));
      }
      // The ids were computed: each row read back must be the one inserted at that position.
      rows.forEach((r, k) => {
        const v = values[k]!;
        if (r.task !== v.task || r.queue !== v.queue || r.payload !== v.payload || Number(r.created_at) !== v.created_at) {
          throw new AdapterError(`${this.name}: the ids of a batch insert were not the ones expected; nothing was stored`);
        }
      });
    }
    if (rows.length !== values.length) throw new AdapterError(`${this.name}: inserted ${rows.length} of ${values.length} jobs`);
    return rows.map(rowToRecord);
  }

  /** When a claim last found a cap on its queues or tasks: until CAPS_MEMORY_MS later, claims skip the one-statement path. */
  #capsSeenAt = Number.NEGATIVE_INFINITY;

  async claim(params: ClaimParams): Promise<JobRecord[]> {
    if (params.limit <= 0 || params.queues.length === 0 || params.tasks?.length === 0) return [];
    if (params.stage !== false) await this.guardErrors(() => this.stageDue(params.now));
    if (this.supportsClaimStatement && params.now - this.#capsSeenAt >= CAPS_MEMORY_MS) {
      const claimed = await this.guardErrors(() => this.writeStatement((db) => this.claimUncapped(db, params)));
      if (claimed.length > 0) return claimed;
    }
    return this.claimWithControls(params);
  }

  /**
   * The common case as ONE statement: claims only when none of the claim's
   * queues and tasks has a cap (paused queues are skipped), so the greedy
   * cap rule has nothing to decide; returns nothing otherwise. The control
   * rows of the claim's queues and tasks are share-locked in the statement,
   * so a pause or cap change waits for it (and it, after waiting, reads the
   * new setting); claims never wait for each other.
   */
  private async claimUncapped(db: AnyDb, params: ClaimParams): Promise<JobRecord[]> {
    const queues = [...params.queues];
    const lockShared = <Q>(q: Q): Q => (this.supportsRowLocks ? this.shareLock(q) : q);
    const query = db
      .with(
        (cte) => cte("ctl_q").materialized(),
        (d) => lockShared(d.selectFrom(this.tables.queues).select(["name", "paused", "max_running"]).where("name", "in", queues)),
      )
      .with(
        (cte) => cte("ctl_t").materialized(),
        (d) => {
          let q = d.selectFrom(this.tables.tasks).select(["name", "max_running"]);
          if (params.tasks !== undefined) q = q.where("name", "in", [...params.tasks]);
          return lockShared(q);
        },
      )
      .with(
        (cte) => cte("picked").materialized(),
        (eb) => {
          let pick = this.guard(eb.selectFrom(this.tables.jobs).select("id"), "claim", { now: params.now })
            .where("queue", "in", queues)
            .where("queue", "not in", eb.selectFrom("ctl_q").select("name").where("paused", "=", 1))
            .where((w: ExpressionBuilder<any, any>) =>
              w.not(
                w.or([
                  w.exists(w.selectFrom("ctl_q").select("name").where("max_running", "is not", null).where("paused", "=", 0)),
                  w.exists(w.selectFrom("ctl_t").select("name").where("max_running", "is not", null)),
                ]),
              ),
            );
          if (params.tasks !== undefined) pick = pick.where("task", "in", [...params.tasks]);
          pick = inClaimOrder(pick).limit(params.limit);
          return this.supportsSkipLocked ? pick.forUpdate().skipLocked() : pick;
        },
      )
      .updateTable(this.tables.jobs)
      .set(this.claimSet(params));
    // A materialized CTE runs once: a LIMIT subquery inside IN may be re-run per row and claim more than `limit`.
    // Where the engine has arrays, `id = ANY(ARRAY(SELECT id FROM picked))`: the ids are computed once and the
    // update goes by primary key alone. The guard is in `picked`, whose FOR UPDATE re-checks it on the newest
    // version of each row it locks, and nothing can change a row this statement holds before it updates it.
    // (With the guard repeated here, or with `IN` or a join, PostgreSQL with stale statistics, e.g. a burst of
    // jobs behind a million finished ones, walked every ready job per claim: 0.7 s per claim of 500 behind 10,000.)
    const rows = (
      this.supportsAnyArray
        ? await query
            .where(sql<boolean>`${sql.ref("id")} = any(array(select ${sql.ref("picked.id")} from ${sql.table("picked")}))`)
            .returningAll()
            .execute()
        : await this.guard(query.where("id", "in", (eb: ExpressionBuilder<any, any>) => eb.selectFrom("picked").select("id")), "claim", {
            now: params.now,
          })
            .returningAll()
            .execute()
    ) as JobRow[];
    return rows.map(rowToRecord).sort(byClaimOrder);
  }

  /** The columns a claim sets: running under the claim's lease, attempt + 1. */
  private claimSet(params: ClaimParams): Record<string, unknown> {
    return {
      state: TRANSITIONS.claim.to,
      attempt: sql`attempt + 1`,
      lease_token: params.leaseToken,
      lease_expires_at: params.leaseExpiresAt,
      updated_at: params.now,
    };
  }

  /**
   * A claim when some control may apply: in one transaction, the control
   * rows of the claim's capped queues are locked exclusively (their room is
   * counted), the others shared; candidates are picked by the greedy cap
   * rule; capped tasks' rows are locked exclusively as candidates reach them.
   */
  private async claimWithControls(params: ClaimParams): Promise<JobRecord[]> {
    const set = this.claimSet(params);
    return this.guardErrors(() =>
      this.writeTransaction(async (db) => {
        const queueRows = await this.lockQueueControls(db, params.queues);
        const paused = new Set(queueRows.filter((r) => Number(r.paused) === 1).map((r) => r.name));
        const capped = queueRows.filter((r) => r.max_running !== null && !paused.has(r.name));
        if (capped.length > 0) this.#capsSeenAt = params.now;
        const uncapped = params.queues.filter((q) => !paused.has(q) && !capped.some((r) => r.name === q));
        const queueRoom = new Map<string, number>();
        for (const r of capped) queueRoom.set(r.name, Number(r.max_running) - (await this.countRunning(db, "queue", r.name)));
        // The greedy rule, in claim order: take a ready job unless its queue's or its task's cap is full.
        // A job of a full task must not hide the jobs behind it, so passes repeat without the
        // exhausted tasks until the limit is reached or nothing is left.
        const taskRoom = new Map<string, number>();
        const checkedTasks = new Set<string>();
        const exhausted = new Set<string>();
        const chosen: number[] = [];
        for (;;) {
          const need = params.limit - chosen.length;
          const groups: { queues: string[]; limit: number }[] = [];
          if (uncapped.length > 0) groups.push({ queues: uncapped, limit: need });
          for (const [queue, room] of queueRoom) if (room > 0) groups.push({ queues: [queue], limit: Math.min(room, need) });
          if (need <= 0 || groups.length === 0) break;
          const candidates: ClaimCandidate[] = [];
          for (const g of groups) {
            let q = this.guard(db.selectFrom(this.tables.jobs).select(["id", "task", "queue", "priority", "run_at"]), "claim", { now: params.now })
              .where("queue", "in", g.queues);
            q = inClaimOrder(q).limit(g.limit);
            if (chosen.length > 0) q = q.where("id", "not in", chosen);
            if (params.tasks !== undefined) q = q.where("task", "in", [...params.tasks]);
            if (exhausted.size > 0) q = q.where("task", "not in", [...exhausted]);
            if (this.supportsSkipLocked) q = q.forUpdate().skipLocked();
            for (const r of await q.execute()) {
              candidates.push({ id: Number(r.id), task: r.task, queue: r.queue, priority: Number(r.priority), runAt: Number(r.run_at) });
            }
          }
          if (candidates.length === 0) break;
          candidates.sort(byClaimOrder);
          const unseen = [...new Set(candidates.map((c) => c.task))].filter((t) => !checkedTasks.has(t));
          for (const [task, room] of await this.taskRoom(db, unseen)) {
            taskRoom.set(task, room);
            this.#capsSeenAt = params.now;
          }
          for (const t of unseen) checkedTasks.add(t);
          const passedOver = takeWithinCaps(candidates, params.limit, { queues: queueRoom, tasks: taskRoom }, chosen, exhausted);
          if (!passedOver) break;
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

  /**
   * The control rows of `queues`, locked for the rest of the transaction:
   * capped ones exclusively (in name order; their room is counted under the
   * lock), the rest shared, so claims of uncapped queues do not wait for each
   * other while a pause or cap change waits for them. A row that gained a
   * cap between the two reads is reported paused: this claim leaves it alone.
   */
  private async lockQueueControls(db: AnyDb, queues: readonly string[]): Promise<QueueRow[]> {
    const read = () => db.selectFrom(this.tables.queues).select(["name", "paused", "max_running"]).where("name", "in", [...queues]).orderBy("name");
    if (!this.supportsRowLocks) return (await read().execute()) as QueueRow[];
    const capped = (await read().where("max_running", "is not", null).forUpdate().execute()) as QueueRow[];
    const cappedNames = new Set(capped.map((r) => r.name));
    const others = (await this.shareLock(read()).execute()) as QueueRow[];
    const rest = others
      .filter((r) => !cappedNames.has(r.name))
      .map((r) => (r.max_running === null ? r : { ...r, paused: 1 }));
    return [...capped, ...rest];
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
    if (this.supportsRowLocks) q = q.forUpdate();
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

  async extendLeases(params: ExtendLeasesParams): Promise<LeaseKey[]> {
    const kept: LeaseKey[] = [];
    for (let i = 0; i < params.items.length; i += BATCH_ROWS) {
      const keys = params.items.slice(i, i + BATCH_ROWS);
      const set = { state: TRANSITIONS.heartbeat.to, lease_expires_at: params.leaseExpiresAt, updated_at: params.now };
      const rows = await this.guardErrors(() =>
        this.writeStatement(async (db) => {
          const update = guardMany(db.updateTable(this.tables.jobs).set(set), "heartbeat", keys);
          if (this.supportsReturning) return (await update.returning(["id", "lease_token"]).execute()) as { id: number | string; lease_token: string }[];
          // Without RETURNING: lock the rows that pass the fence, extend them, in one transaction.
          let pick = guardMany(db.selectFrom(this.tables.jobs).select(["id", "lease_token"]), "heartbeat", keys);
          if (this.supportsRowLocks) pick = pick.forUpdate();
          const held = (await pick.execute()) as { id: number | string; lease_token: string }[];
          if (held.length > 0) await update.where("id", "in", held.map((r) => Number(r.id))).execute();
          return held;
        }),
      );
      for (const r of rows) kept.push({ id: Number(r.id), leaseToken: r.lease_token });
    }
    return kept;
  }

  complete(params: FencedParams): Promise<JobRecord | null> {
    const w = outcomeWrite({ ...params, kind: "complete" });
    return this.transition(w.event, params, w.set);
  }

  fail(params: FailParams): Promise<JobRecord | null> {
    const w = outcomeWrite({ ...params, kind: "fail" });
    return this.transition(w.event, params, w.set);
  }

  release(params: FencedParams): Promise<JobRecord | null> {
    const w = outcomeWrite({ ...params, kind: "release" });
    return this.transition(w.event, params, w.set);
  }

  async settle(params: SettleParams): Promise<(SettledJob | null)[]> {
    const results: (SettledJob | null)[] = params.items.map(() => null);
    const writes = params.items.map((item, index) => ({ index, item, ...outcomeWrite(item) }));
    // Jobs the caller knows to be unkeyed: one guarded statement per distinct write, all in one unit of work.
    // A job named twice (a stale attempt beside a fresh one) goes on its own: results are matched by id.
    const seen = new Map<number, number>();
    for (const w of writes) seen.set(w.item.id, (seen.get(w.item.id) ?? 0) + 1);
    const groups = new Map<string, typeof writes>();
    for (const w of writes) {
      if (w.item.concurrencyKey !== null || seen.get(w.item.id)! > 1) continue;
      const id = groupKey(w.item);
      const group = groups.get(id);
      if (group) group.push(w);
      else groups.set(id, [w]);
    }
    if (groups.size > 0) {
      const run = (db: AnyDb) => this.settleGroups(db, [...groups.values()]);
      const rows = await this.guardErrors(() => (groups.size === 1 ? this.writeStatement(run) : this.writeTransaction(run)));
      for (const group of groups.values()) for (const w of group) results[w.index] = rows.get(w.item.id) ?? null;
    }
    // Keyed jobs, jobs named twice, and misses (a lost race, or a key after all): one transition each,
    // with the key's promotion.
    for (const w of writes) {
      if (results[w.index] !== null) continue;
      const key = { ...w.item, concurrencyKey: w.item.concurrencyKey === null ? undefined : w.item.concurrencyKey };
      results[w.index] = await this.transition(w.event, key, w.set);
    }
    return results;
  }

  /** Applies each group (one event, one set of columns) to its unkeyed jobs; the records that moved, by id. */
  private async settleGroups(
    db: AnyDb,
    groups: { event: TransitionEvent; set: Record<string, unknown>; item: SettleItem }[][],
  ): Promise<Map<number, SettledJob>> {
    const moved = new Map<number, SettledJob>();
    for (const group of groups) {
      const { event, set, item } = group[0]!;
      const keys = group.map((w) => ({ id: w.item.id, leaseToken: w.item.leaseToken }));
      const fenced = <Q extends { where: (...args: any[]) => any }>(q: Q): Q => guardMany(q, event, keys).where("concurrency_key", "is", null);
      const update = fenced(db.updateTable(this.tables.jobs).set({ ...set, state: TRANSITIONS[event].to, updated_at: item.now }));
      let rows: SettledRow[];
      if (this.supportsReturning) {
        rows = (await update.returning(SETTLED_COLUMNS).execute()) as SettledRow[];
      } else {
        // Lock the rows that pass the fence, write them, read them back: all under this transaction's locks.
        let pick = fenced(db.selectFrom(this.tables.jobs).select("id"));
        if (this.supportsRowLocks) pick = pick.forUpdate();
        const ids = ((await pick.execute()) as { id: number | string }[]).map((r) => Number(r.id));
        if (ids.length === 0) continue;
        await update.where("id", "in", ids).execute();
        rows = (await db.selectFrom(this.tables.jobs).select(SETTLED_COLUMNS).where("id", "in", ids).execute()) as SettledRow[];
      }
      for (const r of rows) moved.set(Number(r.id), rowToSettled(r));
      if (event === "release") await this.announceReady(db, rows.map((r) => ({ queue: r.queue, due: false })));
    }
    return moved;
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
    const w = failureWrite(params, "expireRetry", "expireBury");
    return this.transition(w.event, params, w.set);
  }

  cancel(params: { id: number; now: number }): Promise<JobRecord | null> {
    return this.transition("cancel", params, { ...CLEAR_LEASE, finished_at: params.now });
  }

  async replay(params: { id: number; now: number }): Promise<JobRecord | null> {
    const record = await this.transition("replay", params, { attempt: 0, run_at: params.now, finished_at: null, last_error: null });
    if (record) await this.guardErrors(() => this.announceReady(this.db, [{ queue: record.queue, due: true }]));
    return record;
  }

  async get(params: { id: number }): Promise<JobRecord | null> {
    return this.guardErrors(async () => {
      const row = (await this.db.selectFrom(this.tables.jobs).selectAll().where("id", "=", params.id).executeTakeFirst()) as
        | JobRow
        | undefined;
      return row ? rowToRecord(row) : null;
    });
  }

  async purge(params: PurgeParams): Promise<number> {
    if (params.limit <= 0 || params.states.length === 0) return 0;
    if (params.states.some((s) => !TERMINAL_STATES.includes(s))) throw new AdapterError(`${this.name}: purge takes finished states only`);
    // deno-lint-ignore no-explicit-any
    const finished = (q: any) => q.where("state", "in", [...params.states]).where("finished_at", "<=", params.finishedBefore);
    return this.guardErrors(() =>
      this.writeTransaction(async (db) => {
        let pick = finished(db.selectFrom(this.tables.jobs).select("id")).orderBy("finished_at").orderBy("id").limit(params.limit);
        if (this.supportsSkipLocked) pick = pick.forUpdate().skipLocked();
        const ids = ((await pick.execute()) as { id: number | string }[]).map((r) => Number(r.id));
        if (ids.length === 0) return 0;
        const result = await finished(db.deleteFrom(this.tables.jobs).where("id", "in", ids)).executeTakeFirst();
        return Number(result.numDeletedRows);
      }),
    );
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

}

/** One "ready" notice per distinct queue of the records that are ready. */
function readyQueues(records: readonly JobRecord[]): { queue: string; due: boolean }[] {
  return [...new Set(records.filter((r) => r.state === "ready").map((r) => r.queue))].map((queue) => ({ queue, due: false }));
}

/** Rows per INSERT, and jobs per batched UPDATE (`extendLeases`). */
const BATCH_ROWS = 500;

/** The transition and the columns (besides state and updated_at) a lease holder's outcome writes. */
function outcomeWrite(item: SettleItem): { event: TransitionEvent; set: Record<string, unknown> } {
  if (item.kind === "complete") return { event: "complete", set: { ...CLEAR_LEASE, finished_at: item.now } };
  if (item.kind === "release") return { event: "release", set: { ...CLEAR_LEASE, attempt: sql`attempt - 1` } };
  return failureWrite(item, "retry", "bury");
}

/** A failed attempt's write, by its holder (retry/bury) or by a sweeper (expireRetry/expireBury): retried at `retryAt`, or dead. */
function failureWrite(params: FailParams, retry: TransitionEvent, bury: TransitionEvent): { event: TransitionEvent; set: Record<string, unknown> } {
  const error = { ...CLEAR_LEASE, last_error: params.error };
  return params.retryAt === null
    ? { event: bury, set: { ...error, finished_at: params.now } }
    : { event: retry, set: { ...error, run_at: params.retryAt } };
}

/** Items that write the same columns with the same values, so one statement serves them all. */
function groupKey(item: SettleItem): string {
  return item.kind === "fail" ? `fail\u0000${item.now}\u0000${item.retryAt}\u0000${item.error}` : `${item.kind}\u0000${item.now}`;
}

/** How long after a claim met a cap the next claims go straight to the transaction that applies caps. */
const CAPS_MEMORY_MS = 1000;

const CLEAR_LEASE = { lease_token: null, lease_expires_at: null } as const;

interface QueueRow {
  name: string;
  paused: number | boolean;
  max_running: number | string | null;
}

function toQueueControl(r: QueueRow): QueueControl {
  return { queue: r.name, paused: Number(r.paused) === 1, maxRunning: r.max_running === null ? null : Number(r.max_running) };
}
