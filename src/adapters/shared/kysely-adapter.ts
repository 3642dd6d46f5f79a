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
  TaskControl,
} from "../../core/adapter.ts";
import { AdapterError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import { TRANSITIONS, type TransitionEvent } from "../../core/transitions.ts";
import { TERMINAL_STATES, type JobState } from "../../core/states.ts";
import { admit, discardReason } from "../../core/concurrency.ts";
import { byClaimOrder, rowToRecord, type JobRow } from "./row.ts";
import type { AnyDb } from "./base.ts";
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
              row.last_error = discardReason(job.concurrency.key, job.concurrency.limit);
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
    if (params.limit <= 0 || params.queues.length === 0 || params.tasks?.length === 0) return [];
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
        const capped = queueRows.filter((r) => r.max_running !== null && !paused.has(r.name));
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
          const candidates: { id: number; task: string; queue: string; priority: number; run_at: number }[] = [];
          for (const g of groups) {
            let q = this.guard(db.selectFrom(this.tables.jobs).select(["id", "task", "queue", "priority", "run_at"]), "claim", { now: params.now })
              .where("queue", "in", g.queues)
              .orderBy("priority")
              .orderBy("run_at")
              .orderBy("id")
              .limit(g.limit);
            if (chosen.length > 0) q = q.where("id", "not in", chosen);
            if (params.tasks !== undefined) q = q.where("task", "in", [...params.tasks]);
            if (exhausted.size > 0) q = q.where("task", "not in", [...exhausted]);
            if (this.supportsSkipLocked) q = q.forUpdate().skipLocked();
            for (const r of await q.execute()) {
              candidates.push({ id: Number(r.id), task: r.task, queue: r.queue, priority: Number(r.priority), run_at: Number(r.run_at) });
            }
          }
          if (candidates.length === 0) break;
          candidates.sort((x, y) => x.priority - y.priority || x.run_at - y.run_at || x.id - y.id);
          const unseen = [...new Set(candidates.map((c) => c.task))].filter((t) => !checkedTasks.has(t));
          for (const [task, room] of await this.taskRoom(db, unseen)) taskRoom.set(task, room);
          for (const t of unseen) checkedTasks.add(t);
          let passedOver = false;
          for (const c of candidates) {
            if (chosen.length >= params.limit) break;
            const qRoom = queueRoom.get(c.queue);
            if (qRoom !== undefined && qRoom <= 0) continue;
            const tRoom = taskRoom.get(c.task);
            if (tRoom !== undefined) {
              if (tRoom <= 0) {
                // Stop here: a group's window may hide, behind this job, one that precedes the rest of the pass.
                exhausted.add(c.task);
                passedOver = true;
                break;
              }
              taskRoom.set(c.task, tRoom - 1);
              if (tRoom - 1 === 0) exhausted.add(c.task);
            }
            if (qRoom !== undefined) queueRoom.set(c.queue, qRoom - 1);
            chosen.push(c.id);
          }
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

  private failLike(params: FailParams, retry: TransitionEvent, bury: TransitionEvent): Promise<JobRecord | null> {
    const error = { ...CLEAR_LEASE, last_error: params.error };
    return params.retryAt === null
      ? this.transition(bury, params, { ...error, finished_at: params.now })
      : this.transition(retry, params, { ...error, run_at: params.retryAt });
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
