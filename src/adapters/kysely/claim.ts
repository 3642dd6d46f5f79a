import { sql } from "kysely";
import type { ClaimParams } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { claimLimits } from "../../core/claim-order.ts";
import type { StoreContext } from "./context.ts";
import { compiledOnce } from "./compiled.ts";
import { stageDue } from "./admission.ts";
import { CAPS_MEMORY_MS, UNTAGGED_LOOK_MS, countedControl, type ClaimMemory } from "./claim-parts.ts";
import { claimWithControls, type FloorUse } from "./controls-claim.ts";
import { claimUncapped, controlledFairQueue, controlledQueue } from "./claim-statement.ts";
import { FLOOR_TUNING, afterClaim, checkFloor, floorOf, floorStart, type FloorTuning } from "./claim-floor.ts";

export { CAPS_MEMORY_MS, claimMemory, claimSet, countedControl, type ClaimMemory } from "./claim-parts.ts";

/**
 * See DocketAdapter.claim. Stages due jobs first (unless told not to), then
 * claims with one statement when the engine can and no cap was met lately;
 * when that finds nothing (or caps apply), with the transaction that applies
 * pause and caps by the core's greedy rule. Either way at most
 * `constrainedLimit` of the jobs are constrained (keyed, or of a capped
 * queue or task). A claim of one queue starts at the claim's floor where the
 * engine can (claim-floor.ts): the one-statement claim (not in fair order),
 * or, where the engine has none (MariaDB), the controls transaction's read
 * of a queue with no control of its own; `spawn` runs the floor's checks
 * beside the claims.
 */
export async function claim(
  ctx: StoreContext,
  memory: ClaimMemory,
  params: ClaimParams,
  spawn?: (work: Promise<void>) => void,
  tuning: FloorTuning = FLOOR_TUNING,
): Promise<JobRecord[]> {
  const constrained = claimLimits(params);
  if (params.limit <= 0 || params.queues.length === 0 || params.tasks?.length === 0) return [];
  if (params.stage !== false) await stageDue(ctx, params.now);
  if (ctx.engine.capabilities.claimStatement && params.now - memory.capsSeenAt >= CAPS_MEMORY_MS) {
    // One queue this store knows fair and not prioritized: the statement takes its tagged jobs in fair order.
    const only = params.queues.length === 1 ? params.queues[0]! : null;
    const fair = only !== null && ctx.fairQueues.fair.has(only) && !ctx.fairQueues.prioritized.has(only);
    const floor = only !== null && !fair && spawn && ctx.engine.capabilities.indexedRowBound ? floorOf(memory.floors, JSON.stringify([only, params.tasks ?? null])) : null;
    const start = floor ? floorStart(floor) : null;
    const from = start?.key ?? null;
    const started = performance.now();
    const claimed = await ctx.engine.writeStatement(ctx.db, (db) => claimUncapped(ctx, db, params, constrained, fair, from));
    if (floor) {
      await afterClaim(ctx, floor, start!, performance.now() - started, claimed, constrained > 0, params, tuning);
      checkFloor(ctx, floor, params, tuning, spawn!);
    }
    if (claimed.length > 0) return claimed;
    // Nothing claimed: no job was ready, or a cap kept the statement from claiming. Only the latter needs the transaction,
    // and an empty fair queue: its jobs without a tag (enqueued before a store knew it fair; a keyed one stays so when
    // its key admits it), looked for at most every UNTAGGED_LOOK_MS while none are found, and at every such claim
    // within UNTAGGED_LOOK_MS of a look that found some (a backlog drains claim after claim, admitted ones as admitted).
    if (!(await capsApply(ctx, params, fair))) {
      if (!fair) return [];
      if (params.now - memory.untaggedLookedAt < UNTAGGED_LOOK_MS && params.now - memory.untaggedFoundAt >= UNTAGGED_LOOK_MS) return [];
      memory.untaggedLookedAt = params.now;
      const untagged = await claimWithControls(ctx, memory, params, constrained);
      if (untagged.length > 0) memory.untaggedFoundAt = params.now;
      return untagged;
    }
  }
  // Where the controls transaction is the only claim (no one-statement claim: MariaDB), it reads a queue with
  // no control of its own from the floor.
  const only = params.queues.length === 1 ? params.queues[0]! : null;
  const floor = only !== null && !ctx.engine.capabilities.claimStatement && spawn && ctx.engine.capabilities.indexedRowBound ? floorOf(memory.floors, JSON.stringify([only, params.tasks ?? null])) : null;
  if (!floor) return claimWithControls(ctx, memory, params, constrained);
  const start = floorStart(floor);
  const use: FloorUse = { from: start.key, read: false, passedOver: null };
  const started = performance.now();
  const claimed = await claimWithControls(ctx, memory, params, constrained, use);
  if (use.read) await afterClaim(ctx, floor, start, performance.now() - started, claimed, constrained > 0, params, tuning, use.passedOver);
  checkFloor(ctx, floor, params, tuning, spawn!);
  return claimed;
}

/**
 * Whether a control stops the one-statement claim: an unpaused queue among
 * the claim's queues with a cap or a rate limit or rate-keyed jobs, or that
 * is fair (has held fairness-keyed jobs), or a
 * task among its tasks (any task when the claim names none) with a cap or
 * a rate limit, as that statement tests it.
 */
async function capsApply(ctx: StoreContext, params: ClaimParams, fair: boolean): Promise<boolean> {
  const { db, tables } = ctx;
  const build = () => {
    let tasks = db.selectFrom(tables.tasks).select(sql<number>`1`.as("capped")).where(countedControl);
    if (params.tasks !== undefined) tasks = tasks.where("name", "in", [...params.tasks]);
    return db
      .selectFrom(tables.queues)
      .select(sql<number>`1`.as("capped"))
      .where("name", "in", [...params.queues])
      .where(fair ? controlledFairQueue : controlledQueue)
      .where("paused", "=", 0)
      .unionAll(tasks)
      .limit(1);
  };
  const compiled = compiledOnce(ctx.statements, JSON.stringify(["caps", params.queues, params.tasks ?? null, fair]), build, {}, ctx.engine.prepare);
  return (await db.executeQuery(compiled)).rows.length > 0;
}
