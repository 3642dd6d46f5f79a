import type { ReplayDeadParams } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { TRANSITIONS } from "../../core/transitions.ts";
import type { StoreContext } from "./context.ts";
import { guard } from "./guard.ts";
import { rowToRecord, type JobRow } from "./row.ts";
import { labelled } from "./labels.ts";

/** The columns a replay sets besides state and updated_at: due now, a fresh attempt budget, no finish. */
export function replaySet(now: number, resetSteps = false): Record<string, unknown> {
  return { attempt: 0, run_at: now, finished_at: null, last_error: null, ...(resetSteps ? { steps: null } : {}) };
}

/**
 * See DocketAdapter.replayDead: in one transaction, pick the dead jobs
 * (skipping rows other transactions hold, where the engine can), move them
 * through the replay guard, announce their queues as due.
 */
export function replayDead(ctx: StoreContext, params: ReplayDeadParams): Promise<JobRecord[]> {
  if (params.limit <= 0) return Promise.resolve([]);
  const { tables, engine } = ctx;
  return engine.writeTransaction(ctx.db, async (db) => {
    let pick = db
      .selectFrom(tables.jobs)
      .select("id")
      .where("state", "in", TRANSITIONS.replay.from)
      .where("finished_at", "<=", params.diedBefore);
    if (params.queue !== undefined) pick = pick.where("queue", "=", params.queue);
    if (params.task !== undefined) pick = pick.where("task", "=", params.task);
    pick = pick.orderBy("finished_at").orderBy("id").limit(params.limit);
    if (engine.capabilities.skipLocked) pick = pick.forUpdate().skipLocked();
    const ids = ((await pick.execute()) as { id: number | string }[]).map((r) => Number(r.id));
    if (ids.length === 0) return [];
    const values = { ...replaySet(params.now, params.resetSteps === true), state: TRANSITIONS.replay.to, updated_at: params.now };
    const update = labelled(guard(db.updateTable(tables.jobs).set(values).where("id", "in", ids), "replay", { now: params.now, byId: true }), "replay");
    let rows: JobRow[];
    if (engine.capabilities.returning) {
      rows = (await update.returningAll().execute()) as JobRow[];
    } else {
      const result = await update.executeTakeFirst();
      rows =
        Number(result.numUpdatedRows) === 0
          ? []
          : ((await db.selectFrom(tables.jobs).selectAll().where("id", "in", ids).where("state", "=", TRANSITIONS.replay.to).execute()) as JobRow[]);
    }
    const records = rows.map(rowToRecord).sort((a, b) => (a.id < b.id ? -1 : 1));
    await engine.announceReady(db, [...new Set(records.map((r) => r.queue))].map((queue) => ({ queue, due: true })));
    return records;
  });
}
