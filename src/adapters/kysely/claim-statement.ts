/**
 * The one-statement claim (see claim.ts for when it runs): the claimable
 * ready jobs of a claim's queues taken and moved to running in ONE
 * statement when no control needs the greedy rule, and the same statement
 * inside the controls transaction for a queue whose only control is a
 * rate limit with slack for the whole claim (controls-claim.ts).
 */
import { sql, type ExpressionBuilder, type QueryCreator } from "kysely";
import type { ClaimParams } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { claimedOrder } from "../../core/claim-order.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { guard, oneStateLiteral } from "./guard.ts";
import { compiledOnce, PLANNED_EACH_RUN, Slot } from "./compiled.ts";
import { claimedRecords, inClaimOrder, type JobRow } from "./row.ts";
import { labelled } from "./labels.ts";
import { claimSet, countedControl, unkeyed } from "./claim-parts.ts";
import { positionBound, type FloorKey } from "./claim-floor.ts";

/** A queue control row whose claims need the controls transaction: counted (above), or it has held rate-keyed or fairness-keyed jobs. */
// deno-lint-ignore no-explicit-any
export const controlledQueue = (eb: ExpressionBuilder<any, any>) => eb.or([countedControl(eb), eb("keyed_rate", "=", 1), eb("fair", "=", 1)]);

/** The same for a claim in fair order: a fair queue needs the transaction only when prioritized (see fair-claim.ts). */
// deno-lint-ignore no-explicit-any
export const controlledFairQueue = (eb: ExpressionBuilder<any, any>) => eb.or([countedControl(eb), eb("keyed_rate", "=", 1), eb("fair_priorities", "=", 1)]);

/**
 * The same for a claim whose transaction holds its queues' rate limits
 * (`claimHeldRate`): a queue row stops it for a cap, rate-keyed jobs or
 * fairness, not for its rate limit.
 */
// deno-lint-ignore no-explicit-any
const controlledBeyondRate = (eb: ExpressionBuilder<any, any>) => eb.or([eb("max_running", "is not", null), eb("keyed_rate", "=", 1), eb("fair", "=", 1)]);

/**
 * The one-statement claim run inside the controls transaction that holds
 * the claim's queues' rows, rate limits and all, locked exclusively (see
 * controls-claim.ts `slackClaim`): as `claimUncapped`, except that a
 * queue's rate limit does not stop it (the caller took its room and logs
 * the starts) and the claimed jobs start at `startedAt`. Like
 * `claimUncapped`, it claims nothing when a task control or another
 * queue control applies. `params.limit` is the caller's, within the
 * limit's room.
 */
export function claimHeldRate(ctx: StoreContext, db: AnyDb, params: ClaimParams, constrained: number, held: HeldRate): Promise<JobRecord[]> {
  return claimUncapped(ctx, db, params, constrained, false, null, held);
}

/**
 * What a claim in the controls transaction passes `claimHeldRate`: when its
 * jobs start, and, where the engine runs a data-modifying WITH (`arrays`:
 * PostgreSQL), the columns to write on the limit's row in the same
 * statement (its log with the claim's starts counted in advance).
 */
export interface HeldRate {
  startedAt: number;
  log?: { table: string; name: string; set: Record<string, unknown> };
}

/** `q` in fair order (tag, then id), its untagged jobs left out; or in claim order. */
// deno-lint-ignore no-explicit-any
function ordered<Q extends { orderBy: (column: string) => any; where: (...args: any[]) => any }>(q: Q, fair: boolean): Q {
  return fair ? q.where("fair_tag", "is not", null).orderBy("fair_tag").orderBy("id") : inClaimOrder(q);
}


/**
 * The common case as ONE statement: claims only when none of the claim's
 * queues and tasks has a cap or a rate limit, and no queue holds rate-keyed
 * jobs or is fair (paused queues are skipped), so the greedy cap rule has nothing to
 * decide; returns nothing otherwise. The control
 * rows of the claim's queues and tasks are share-locked in the statement,
 * so a pause or cap change waits for it (and it, after waiting, reads the
 * new setting); claims never wait for each other. With `constrained` below
 * the limit, it takes at most that many keyed jobs (see `uncappedStatement`).
 */
export async function claimUncapped(ctx: StoreContext, db: AnyDb, params: ClaimParams, constrained: number, fair: boolean, from: FloorKey | null, held?: HeldRate): Promise<JobRecord[]> {
  // Built and compiled once per queue and task set; the values that change per claim are slots.
  // Planned at each run, not prepared (PLANNED_EACH_RUN): a plan kept from a nearly empty table scans every
  // job after a burst. Its states are literals (see guard), so any plan finds ready jobs through the partial
  // claim index. (With the states as parameters PostgreSQL's generic plan scanned and sorted every ready job.)
  const keyed: KeyedPick = constrained >= params.limit ? "any" : constrained === 0 ? "none" : "some";
  const logged = held?.log ? { table: held.log.table, columns: Object.keys(held.log.set).sort() } : null;
  const key = JSON.stringify([params.queues, params.tasks ?? null, keyed, fair, from !== null, held !== undefined, logged]);
  const values: Record<string, unknown> = {
    now: params.now,
    limit: params.limit,
    constrainedLimit: constrained,
    leaseToken: params.leaseToken,
    leaseExpiresAt: params.leaseExpiresAt,
    worker: params.worker ?? null,
  };
  if (from !== null) Object.assign(values, { floorPriority: from.priority, floorRunAt: from.runAt, floorId: from.id });
  if (held !== undefined) values.startedAt = held.startedAt;
  if (held?.log) {
    values.logName = held.log.name;
    for (const [column, value] of Object.entries(held.log.set)) values[`log_${column}`] = value;
  }
  const build = () => uncappedStatement(ctx, ctx.db, { ...params, ...SLOTTED } as unknown as ClaimParams, keyed, fair, from !== null, held !== undefined, logged);
  const compiled = compiledOnce(ctx.statements, key, build, values, PLANNED_EACH_RUN);
  const rows = (await db.executeQuery(compiled)).rows as JobRow[];
  return claimedOrder(claimedRecords(rows), params.constrainedLimit === undefined ? null : (j) => j.concurrencyKey !== null);
}

/** The claim parameters that change from one claim to the next: slots in the compiled claim. */
const CLAIM_SLOTS = ["now", "limit", "constrainedLimit", "leaseToken", "leaseExpiresAt", "worker"] as const;
const SLOTTED = Object.fromEntries(CLAIM_SLOTS.map((name) => [name, new Slot(name)]));
/** The columns a split claim's picks carry, to be ordered together. */
const ORDER_COLUMNS = ["id", "priority", "run_at", "fair_tag"];

/** The floor's position in claim order (slots), as a bound the claim index starts at (see claim-floor.ts). */
const FLOOR_SLOTS = { priority: new Slot("floorPriority"), runAt: new Slot("floorRunAt"), id: new Slot("floorId") };

/** How many keyed jobs a one-statement claim may take: any number (up to `limit`), none, or some (`constrainedLimit`). */
type KeyedPick = "any" | "none" | "some";

/**
 * The one-statement claim: `picked` is the first `limit` claimable ready
 * jobs in claim order, locked; with `keyed` "none", of the unkeyed ones;
 * with "some", the first `limit` in claim order of two picks, each locked on
 * its own: the first `limit` unkeyed ready jobs, and the first
 * `constrainedLimit` keyed ones among the first `limit` ready jobs (a keyed
 * job behind those could not be among the first `limit` taken). The rows
 * locked but left out are not written and stay ready. With `floored`, only
 * jobs at or after the claim's floor (slots) are read.
 */
function uncappedStatement(
  ctx: StoreContext,
  db: AnyDb,
  params: ClaimParams,
  keyed: KeyedPick,
  fair: boolean,
  floored: boolean,
  rateHeld = false,
  logged: { table: string; columns: string[] } | null = null,
) {
  const { tables, engine } = ctx;
  const caps = engine.capabilities;
  const queues = [...params.queues];
  const lockShared = <Q>(q: Q): Q => (caps.rowLocks ? engine.shareLock(q) : q);
  // deno-lint-ignore no-explicit-any
  const writing: QueryCreator<any> = logged === null ? db : db.with("rate_log", (d) => d.updateTable(logged.table).set(Object.fromEntries(logged.columns.map((c) => [c, new Slot(`log_${c}`)]))).where("name", "=", new Slot("logName")) as never);
  const controls = writing
    .with(
      (cte) => cte("ctl_q").materialized(),
      (d) => lockShared(d.selectFrom(tables.queues).select(["name", "paused", "max_running", "rate_limit", "keyed_rate", "fair", "fair_priorities"]).where("name", "in", queues)),
    )
    .with(
      (cte) => cte("ctl_t").materialized(),
      (d) => {
        let q = d.selectFrom(tables.tasks).select(["name", "max_running", "rate_limit"]);
        if (params.tasks !== undefined) q = q.where("name", "in", [...params.tasks]);
        return lockShared(q);
      },
    );
  const lock = <Q extends { forUpdate: () => { skipLocked: () => Q } }>(q: Q): Q => (caps.skipLocked ? q.forUpdate().skipLocked() : q);
  /**
   * The claimable ready jobs of the claim's queues and tasks, `columns` of
   * them, with `where` added, the first `limit` in claim order; with
   * `locked`, each read locked (`FOR UPDATE SKIP LOCKED`) where the engine
   * can. Of several queues: the first `limit` of each queue's first
   * `limit`, each queue read on its own in index order (and locked on its
   * own: at most `limit` rows per queue; those left out stay ready and are
   * not written). One read of all of them in claim order sorts every ready
   * job of those queues on PostgreSQL: a claim of 100 behind 100,000 took
   * 37 ms against 2 ms for one queue, and grew with the backlog.
   */
  // deno-lint-ignore no-explicit-any
  const ready = (eb: any, columns: string[], limit: number, where: (q: any) => any = (q) => q, locked = false) => {
    if (queues.length === 1) return readyOf(eb, queues, columns, limit, where, locked);
    const read = [...new Set([...columns, ...ORDER_COLUMNS])];
    // deno-lint-ignore no-explicit-any
    const parts = queues.map((queue, i) => eb.selectFrom(readyOf(eb, [queue], read, limit, where, locked).as(`rq${i}`)).selectAll()) as any[];
    const union = parts.slice(1).reduce((u, part) => u.unionAll(part), parts[0]);
    return ordered(eb.selectFrom(union.as("rq")).select(columns), fair).limit(limit);
  };
  // deno-lint-ignore no-explicit-any
  const readyOf = (eb: any, of: string[], columns: string[], limit: number, where: (q: any) => any, locked: boolean) => {
    let q = guard(eb.selectFrom(tables.jobs).select(columns), "claim", { now: params.now })
      .where("queue", "in", of)
      .where("queue", "not in", eb.selectFrom("ctl_q").select("name").where("paused", "=", 1))
      .where((w: ExpressionBuilder<any, any>) =>
        w.not(
          w.or([
            w.exists(
              w
                .selectFrom("ctl_q")
                .select("name")
                .where(rateHeld ? controlledBeyondRate : fair ? controlledFairQueue : controlledQueue)
                .where("paused", "=", 0),
            ),
            w.exists(w.selectFrom("ctl_t").select("name").where(countedControl)),
          ]),
        ),
      );
    if (params.tasks !== undefined) q = q.where("task", "in", [...params.tasks]);
    if (floored) q = q.where(positionBound(caps.indexedRowBound || "row", ">=", FLOOR_SLOTS));
    // A fair queue's jobs through its tag index, on every engine (see oneStateLiteral).
    if (fair) q = q.where(oneStateLiteral("claim"));
    const read = ordered(where(q), fair).limit(limit);
    return locked ? lock(read) : read;
  };
  if (keyed !== "some") {
    const pick = (eb: unknown) => ready(eb, ["id"], params.limit, keyed === "none" ? unkeyed : undefined, true);
    return finishClaim(ctx, controls.with((cte) => cte("picked").materialized(), pick), params, rateHeld);
  }
  const picking = controls
    .with((cte) => cte("unkeyed").materialized(), (eb) => ready(eb, ORDER_COLUMNS, params.limit, unkeyed, true))
    // The keyed jobs are chosen among the first `limit` ready ones, read unlocked (a bounded read of the claim
    // index, however many unkeyed jobs come first), then locked by id with the guard checked again; one another
    // claim holds is passed over.
    .with(
      (cte) => cte("keyed").materialized(),
      (eb) => {
        const window = ready(eb, [...ORDER_COLUMNS, "concurrency_key"], params.limit).as("w");
        const chosen = ordered(eb.selectFrom(window).select("w.id").where("w.concurrency_key", "is not", null), fair).limit(params.constrainedLimit!);
        const byId = caps.arrays ? sql<boolean>`${sql.ref("id")} = any(array(${chosen}))` : (w: ExpressionBuilder<any, any>) => w("id", "in", chosen);
        return lock(guard(eb.selectFrom(tables.jobs).select(ORDER_COLUMNS).where(byId), "claim", { now: params.now, byId: true }));
      },
    )
    .with(
      (cte) => cte("picked").materialized(),
      // deno-lint-ignore no-explicit-any
      (eb: any) => {
        const both = eb.selectFrom("unkeyed").select(ORDER_COLUMNS).unionAll(eb.selectFrom("keyed").select(ORDER_COLUMNS));
        return ordered(eb.selectFrom(both.as("both")).select("id"), fair).limit(params.limit);
      },
    );
  return finishClaim(ctx, picking, params, rateHeld);
}

/** The UPDATE of a claim's `picked` jobs (a CTE of ids): running under the claim's lease, returning the rows. */
// deno-lint-ignore no-explicit-any
function finishClaim(ctx: StoreContext, picking: any, params: ClaimParams, rateHeld: boolean) {
  const { tables, engine } = ctx;
  const caps = engine.capabilities;
  const query = picking.updateTable(tables.jobs).set(claimSet(params, rateHeld ? (new Slot("startedAt") as unknown as number) : params.now));
  // A materialized CTE runs once: a LIMIT subquery inside IN may be re-run per row and claim more than `limit`.
  // Where the engine has arrays, `id = ANY(ARRAY(SELECT id FROM picked))`: the ids are computed once and the
  // update goes by primary key alone. The guard is in the picks, whose FOR UPDATE re-checks it on the newest
  // version of each row it locks, and nothing can change a row this statement holds before it updates it.
  // (With the guard repeated here, or with `IN` or a join, PostgreSQL with stale statistics, e.g. a burst of
  // jobs behind a million finished ones, walked every ready job per claim: 0.7 s per claim of 500 behind 10,000.)
  const claimed = caps.arrays
    ? query.where(sql<boolean>`${sql.ref("id")} = any(array(select ${sql.ref("picked.id")} from ${sql.table("picked")}))`).returningAll()
    : guard(query.where("id", "in", (eb: ExpressionBuilder<any, any>) => eb.selectFrom("picked").select("id")), "claim", { now: params.now, byId: true }).returningAll();
  return labelled(claimed, "claim");
}
