import type { FireScheduleParams, PutScheduleParams, StoredSchedule } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import type { StoreContext } from "./context.ts";
import type { Engine } from "./engine.ts";
import { enqueue } from "./enqueue.ts";
import { labelled } from "./labels.ts";
import { sameDefinition } from "../../core/schedules.ts";

interface ScheduleRow {
  name: string;
  cron: string;
  timezone: string;
  task: string;
  queue: string;
  payload: string;
  options: string;
  last_tick: number | string;
  paused?: number | string | boolean | null;
  created_at: number | string;
  updated_at: number | string;
}

function toSchedule(r: ScheduleRow): StoredSchedule {
  return {
    name: r.name,
    cron: r.cron,
    timezone: r.timezone,
    task: r.task,
    queue: r.queue,
    payload: r.payload,
    options: r.options,
    lastTick: Number(r.last_tick),
    paused: Number(r.paused ?? 0) === 1 || r.paused === true,
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

/**
 * See DocketAdapter.putSchedule: inserts unless the name exists (concurrent
 * puts of a new name: one inserts, the others wait for its row), else under
 * the row's lock replaces a changed definition and moves last_tick forward
 * to `lastTick` (never back), and leaves an unchanged one as it is.
 */
export async function putSchedule(ctx: StoreContext, p: PutScheduleParams): Promise<StoredSchedule> {
  const { db, engine, tables } = ctx;
  return engine.writeTransaction(db, async (trx) => {
    const definition = { cron: p.cron, timezone: p.timezone, task: p.task, queue: p.queue, payload: p.payload, options: p.options };
    const insert = trx.insertInto(tables.schedules).values({ name: p.name, ...definition, last_tick: p.lastTick, created_at: p.now, updated_at: p.now });
    // (Row counts cannot tell an insert from a duplicate on MariaDB, whose client counts found rows: the read below decides.)
    await (engine.capabilities.onConflict ? insert.onConflict((oc) => oc.column("name").doNothing()) : insert.onDuplicateKeyUpdate({ name: p.name })).execute();
    let read = trx.selectFrom(tables.schedules).selectAll().where("name", "=", p.name);
    if (engine.capabilities.rowLocks) read = read.forUpdate();
    const current = (await read.executeTakeFirstOrThrow()) as ScheduleRow;
    if (sameDefinition(current, p)) return toSchedule(current);
    await trx
      .updateTable(tables.schedules)
      .set({ ...definition, updated_at: p.now, last_tick: Math.max(Number(current.last_tick), p.lastTick) })
      .where("name", "=", p.name)
      .execute();
    const row = (await trx.selectFrom(tables.schedules).selectAll().where("name", "=", p.name).executeTakeFirstOrThrow()) as ScheduleRow;
    return toSchedule(row);
  });
}

export async function listSchedules(ctx: StoreContext): Promise<StoredSchedule[]> {
  const rows = (await ctx.db.selectFrom(ctx.tables.schedules).selectAll().orderBy("name").execute()) as ScheduleRow[];
  return rows.map(toSchedule);
}

export async function deleteSchedule(ctx: StoreContext, name: string): Promise<boolean> {
  const r = await ctx.engine.writeStatement(ctx.db, (w) => w.deleteFrom(ctx.tables.schedules).where("name", "=", name).executeTakeFirst());
  return Number(r.numDeletedRows) > 0;
}

/**
 * See DocketAdapter.fireSchedule: moves the schedule's last_tick to `tick`
 * only if it is behind it (compare-and-set), and in the same transaction
 * stores the tick's job. Of any number of concurrent calls for one tick,
 * exactly one stores a job; the others (and a call for an older tick)
 * store nothing and return null.
 */
export async function fireSchedule(ctx: StoreContext, p: FireScheduleParams, background: (work: Promise<void>) => void): Promise<JobRecord | null> {
  const { db, engine, tables } = ctx;
  return engine.writeTransaction(db, async (trx) => {
    const write = trx.updateTable(tables.schedules).set({ last_tick: p.tick, updated_at: p.now }).where("name", "=", p.name).where("last_tick", "<", p.tick).where("paused", "=", 0);
    const moved = await labelled(write, "tick").executeTakeFirst();
    if (Number(moved.numUpdatedRows) !== 1) return null;
    const inTrx: Engine = { ...engine, writeTransaction: (_db, fn) => fn(trx), writeStatement: (_db, fn) => fn(trx) };
    const [job] = await enqueue({ ...ctx, db: trx, engine: inTrx }, { jobs: [p.job], now: p.now, transaction: trx }, background);
    const { created: _created, ...record } = job!;
    return record;
  });
}

/** See DocketAdapter.pauseSchedule. */
export async function pauseSchedule(ctx: StoreContext, p: { name: string; paused: boolean; now: number; lastTick?: number }): Promise<StoredSchedule | null> {
  const { db, engine, tables } = ctx;
  return engine.writeTransaction(db, async (trx) => {
    await trx.updateTable(tables.schedules).set({ paused: p.paused ? 1 : 0, updated_at: p.now }).where("name", "=", p.name).execute();
    if (p.lastTick !== undefined) {
      await trx.updateTable(tables.schedules).set({ last_tick: p.lastTick }).where("name", "=", p.name).where("last_tick", "<", p.lastTick).execute();
    }
    const row = (await trx.selectFrom(tables.schedules).selectAll().where("name", "=", p.name).executeTakeFirst()) as ScheduleRow | undefined;
    return row ? toSchedule(row) : null;
  });
}
