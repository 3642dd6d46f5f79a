import type { PurgeParams } from "../../core/adapter.ts";
import { AdapterError } from "../../core/errors.ts";
import { TERMINAL_STATES } from "../../core/states.ts";
import type { StoreContext } from "./context.ts";
import { deleteEdges } from "./dependencies.ts";

/**
 * See DocketAdapter.purge: deletes at most `limit` finished jobs of the
 * given states finished before the cutoff, oldest first, in one
 * transaction, with their dependency edges; rows another purger holds are
 * skipped where the engine can.
 */
export async function purge(ctx: StoreContext, params: PurgeParams): Promise<number> {
  if (params.limit <= 0 || params.states.length === 0) return 0;
  if (params.states.some((s) => !TERMINAL_STATES.includes(s))) throw new AdapterError(`${ctx.engine.name}: purge takes finished states only`);
  // deno-lint-ignore no-explicit-any
  const finished = (q: any) => {
    let f = q.where("state", "in", [...params.states]).where("finished_at", "<=", params.finishedBefore);
    if (params.queue !== undefined) f = f.where("queue", "=", params.queue);
    if (params.task !== undefined) f = f.where("task", "=", params.task);
    if (params.id !== undefined) f = f.where("id", "=", params.id);
    return f;
  };
  return ctx.engine.writeTransaction(ctx.db, async (db) => {
    let pick = finished(db.selectFrom(ctx.tables.jobs).select("id")).orderBy("finished_at").orderBy("id").limit(params.limit);
    // One job by id waits for a concurrent purge's lock (it then finds the job gone), rather than passing it over as still there.
    if (ctx.engine.capabilities.skipLocked) pick = params.id === undefined ? pick.forUpdate().skipLocked() : pick.forUpdate();
    const ids = ((await pick.execute()) as { id: number | string }[]).map((r) => Number(r.id));
    if (ids.length === 0) return 0;
    const result = await finished(db.deleteFrom(ctx.tables.jobs).where("id", "in", ids)).executeTakeFirst();
    await deleteEdges(ctx, db, ids);
    return Number(result.numDeletedRows);
  });
}
