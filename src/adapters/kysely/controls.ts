import type { QueueControl, SetQueueControlParams, SetTaskControlParams, StoredControls, TaskControl } from "../../core/adapter.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";

/** A queue control row as drivers return it. */
export interface QueueRow {
  name: string;
  paused: number | boolean;
  max_running: number | string | null;
}

function toQueueControl(r: QueueRow): QueueControl {
  return { queue: r.name, paused: Number(r.paused) === 1, maxRunning: r.max_running === null ? null : Number(r.max_running) };
}

/** See DocketAdapter.setQueueControl: one transaction, so it waits for the claims that lock the row. */
export function setQueueControl(ctx: StoreContext, params: SetQueueControlParams): Promise<QueueControl> {
  const changes: Record<string, unknown> = {};
  if (params.paused !== undefined) changes.paused = params.paused ? 1 : 0;
  if (params.maxRunning !== undefined) changes.max_running = params.maxRunning;
  return ctx.engine.writeTransaction(ctx.db, async (db) => {
    await upsert(ctx, db, ctx.tables.queues, { name: params.queue, paused: 0, max_running: null, ...changes }, changes);
    const row = (await db.selectFrom(ctx.tables.queues).selectAll().where("name", "=", params.queue).executeTakeFirstOrThrow()) as QueueRow;
    return toQueueControl(row);
  });
}

/** See DocketAdapter.setTaskControl. */
export function setTaskControl(ctx: StoreContext, params: SetTaskControlParams): Promise<TaskControl> {
  const changes = { max_running: params.maxRunning };
  return ctx.engine.writeTransaction(ctx.db, async (db) => {
    await upsert(ctx, db, ctx.tables.tasks, { name: params.task, ...changes }, changes);
    return { task: params.task, maxRunning: params.maxRunning };
  });
}

/** See DocketAdapter.listControls. */
export async function listControls(ctx: StoreContext): Promise<StoredControls> {
  const queues = (await ctx.db.selectFrom(ctx.tables.queues).selectAll().orderBy("name").execute()) as QueueRow[];
  const tasks = (await ctx.db.selectFrom(ctx.tables.tasks).selectAll().orderBy("name").execute()) as { name: string; max_running: number | null }[];
  return {
    queues: queues.map(toQueueControl),
    tasks: tasks.map((t) => ({ task: t.name, maxRunning: t.max_running === null ? null : Number(t.max_running) })),
  };
}

/** INSERT, or on a duplicate `name` UPDATE `changes` (nothing when empty), in the engine's spelling. */
export async function upsert(ctx: StoreContext, db: AnyDb, table: string, row: Record<string, unknown>, changes: Record<string, unknown>): Promise<void> {
  const insert = db.insertInto(table).values(row);
  const set = Object.keys(changes).length > 0 ? changes : { name: row.name };
  await (ctx.engine.capabilities.onConflict ? insert.onConflict((oc) => oc.column("name").doUpdateSet(set)) : insert.onDuplicateKeyUpdate(set)).execute();
}
