import { sql } from "kysely";
import type { QueueControl, SetQueueControlParams, SetTaskControlParams, StoredControls, TaskControl } from "../../core/adapter.ts";
import { controlIsDefault } from "../../core/controls.ts";
import type { RateLimit } from "../../core/rate-limit.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { GUARD_COLUMN, locksAreLocal } from "./guard-writes.ts";

/** A queue control row as drivers return it. */
export interface QueueRow extends RateColumns {
  name: string;
  paused: number | boolean;
  max_running: number | string | null;
  keyed_rate?: number | string;
  fair?: number | string;
  fair_priorities?: number | string;
}

/** A task control row as drivers return it. */
export interface TaskRow extends RateColumns {
  name: string;
  max_running: number | string | null;
}

/** A rate limit's columns (queues, tasks, rate keys): the limit, its period, its log of starts, and when it next has room after a claim left it with none. */
export interface RateColumns {
  rate_limit?: number | string | null;
  rate_period_ms?: number | string | bigint | null;
  rate_starts?: string | null;
  rate_held_until?: number | string | bigint | null;
}

/**
 * The columns a rate limit setting writes: a new limit keeps its log (the
 * starts in its window still count) but not when the old one had room
 * again (see JobRecord.delayedBy).
 */
export function rateValues(limit: RateLimit | null): Record<string, unknown> {
  return limit === null ? { rate_limit: null, rate_period_ms: null, rate_starts: null, rate_held_until: null } : { rate_limit: limit.limit, rate_period_ms: limit.periodMs, rate_held_until: null };
}

/** The stored rate limit of a row, or null. */
export function rateLimitOf(r: RateColumns): RateLimit | null {
  return r.rate_limit === null || r.rate_limit === undefined ? null : { limit: Number(r.rate_limit), periodMs: Number(r.rate_period_ms) };
}

function toQueueControl(r: QueueRow): QueueControl {
  return { queue: r.name, paused: Number(r.paused) === 1, maxRunning: r.max_running === null ? null : Number(r.max_running), rateLimit: rateLimitOf(r) };
}

function toTaskControl(r: TaskRow): TaskControl {
  return { task: r.name, maxRunning: r.max_running === null ? null : Number(r.max_running), rateLimit: rateLimitOf(r) };
}

/** Whether a queue row holds none of the marks enqueues leave (rate-keyed, fair): then only its control keeps it. */
function unmarked(r: QueueRow): boolean {
  return [r.keyed_rate, r.fair, r.fair_priorities].every((v) => v === undefined || Number(v) === 0);
}

/**
 * See DocketAdapter.setQueueControl: one transaction, so it waits for the
 * claims that lock the row; a row left at every default is deleted; announces
 * the queue ready on commit.
 */
export function setQueueControl(ctx: StoreContext, params: SetQueueControlParams): Promise<QueueControl> {
  const changes: Record<string, unknown> = {};
  if (params.paused !== undefined) changes.paused = params.paused ? 1 : 0;
  if (params.maxRunning !== undefined) changes.max_running = params.maxRunning;
  if (params.rateLimit !== undefined) Object.assign(changes, rateValues(params.rateLimit));
  return ctx.engine.writeTransaction(ctx.db, async (db) => {
    await upsert(ctx, db, ctx.tables.queues, { name: params.queue, paused: 0, max_running: null, ...changes }, changes);
    const row = (await db.selectFrom(ctx.tables.queues).selectAll().where("name", "=", params.queue).executeTakeFirstOrThrow()) as QueueRow;
    // Under the row's lock (the upsert's): a row back to every default goes, so a mistyped name leaves nothing behind.
    if (controlIsDefault(toQueueControl(row)) && unmarked(row)) await db.deleteFrom(ctx.tables.queues).where("name", "=", params.queue).execute();
    // A resumed queue, a raised cap or a changed limit may let waiting jobs start: workers claim now, not at their next poll.
    await ctx.engine.announceReady(db, [{ queue: params.queue, due: false }]);
    return toQueueControl(row);
  });
}

/** See DocketAdapter.setTaskControl; a row left at every default is deleted; announces every queue ready on commit. */
export function setTaskControl(ctx: StoreContext, params: SetTaskControlParams): Promise<TaskControl> {
  const changes: Record<string, unknown> = {};
  if (params.maxRunning !== undefined) changes.max_running = params.maxRunning;
  if (params.rateLimit !== undefined) Object.assign(changes, rateValues(params.rateLimit));
  return ctx.engine.writeTransaction(ctx.db, async (db) => {
    await upsert(ctx, db, ctx.tables.tasks, { name: params.task, max_running: null, ...changes }, changes);
    const row = (await db.selectFrom(ctx.tables.tasks).selectAll().where("name", "=", params.task).executeTakeFirstOrThrow()) as TaskRow;
    if (controlIsDefault(toTaskControl(row))) await db.deleteFrom(ctx.tables.tasks).where("name", "=", params.task).execute();
    // The task's jobs may be in any queue: every worker claims now.
    await ctx.engine.announceReady(db, [{ queue: null, due: false }]);
    return toTaskControl(row);
  });
}

/** See DocketAdapter.listControls. */
export async function listControls(ctx: StoreContext): Promise<StoredControls> {
  const queues = (await ctx.db.selectFrom(ctx.tables.queues).selectAll().orderBy("name").execute()) as QueueRow[];
  const tasks = (await ctx.db.selectFrom(ctx.tables.tasks).selectAll().orderBy("name").execute()) as TaskRow[];
  return { queues: queues.map(toQueueControl), tasks: tasks.map(toTaskControl) };
}

/** INSERT, or on a duplicate `name` UPDATE `changes` (nothing when empty), in the engine's spelling. */
export async function upsert(ctx: StoreContext, db: AnyDb, table: string, row: Record<string, unknown>, changes: Record<string, unknown>): Promise<void> {
  const insert = db.insertInto(table).values(row);
  // Where locks are local to a server, the row is written even when nothing changes: a guard write (guard-writes.ts).
  const guarded = locksAreLocal(ctx) ? { ...changes, [GUARD_COLUMN]: sql`${sql.ref(GUARD_COLUMN)} + 1` } : changes;
  const set = Object.keys(guarded).length > 0 ? guarded : { name: row.name };
  await (ctx.engine.capabilities.onConflict ? insert.onConflict((oc) => oc.column("name").doUpdateSet(set)) : insert.onDuplicateKeyUpdate(set)).execute();
}
