/**
 * The claim floor: how a one-statement claim of one queue stays fast while
 * something holds the MVCC horizon back (a session left in a transaction, a
 * long report, a lagging replication slot).
 *
 * A claim reads the claim index from the queue's head. Every job claimed
 * since the horizon was pinned leaves an entry there that the engine cannot
 * remove yet, and the read visits each one's row to find it no longer ready:
 * after ten minutes at 2,000 jobs/s, 1.2 million visits per claim (p99 start
 * latency 62 ms → 1.8 s, bench/horizon.ts). Where the engine starts an index
 * scan at a position (`indexedRowBound`: a row value on PostgreSQL, the
 * bound written out term by term on MariaDB), once claims find the head slow
 * (FLOOR_TUNING) the next ones start at a floor, `(priority, run_at, id)
 * >= floor` (on MariaDB with the ready index forced, Engine.forcedIndex, and
 * read unlocked, the window's rows then locked by id: controls-claim.ts
 * readWindows), a second (`lagMs`) before the first job the last claim took
 * (every job before that one was then claimed, held by another claim, or
 * not yet committed; the second lets enqueues that committed late, or came
 * from a host whose clock is a little behind, be read by the next claim;
 * the entries read again are a second's claims). A job that becomes ready
 * below the floor (a higher
 * priority than the backlog, a delayed job due earlier, an enqueue committed
 * late, a claim rolled back) is not lost: a check in the background reads
 * the head as it is, at most every `checkMs` (or `checkFactor` × its own last
 * duration, if more), and lowers the floor to the first ready job it finds;
 * when the head reads fast and nothing is below the floor, the floor is
 * dropped and claims read from the head again. So a floor changes only when
 * such a job starts, never whether it does.
 */
import { sql, type RawBuilder, type SelectQueryBuilder } from "kysely";
import type { ClaimParams } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import type { StoreContext } from "./context.ts";
import { guard } from "./guard.ts";
import { inClaimOrder } from "./row.ts";
import { labelled } from "./labels.ts";
import type { AnyDb, Engine, FloorTuning } from "./engine.ts";

export type { FloorTuning } from "./engine.ts";

/** A position in claim order. */
export interface FloorKey {
  priority: number;
  runAt: number;
  id: number;
}

/** One claim's floor (per queue and task set, in one store). */
export interface ClaimFloor {
  /** Where claims start; null: at the head. */
  key: FloorKey | null;
  /** Claims from the head in a row that were slow. */
  slowRun: number;
  /** Whether claims of this set found the head slow (then each claim that may take keyed jobs moves the floor to its first job). */
  active: boolean;
  /** When the next background check may start. */
  checkAt: number;
  checking: boolean;
  /** Slow claims asked for a read of the head that confirms it is slow before the floor turns on. */
  confirm: boolean;
  /** How many times a check has lowered the floor (a claim that began before a lowering must not raise it past it). */
  lowerings: number;
}

/** Where a claim began: the floor it read from (null: the head), and the floor's lowerings then. */
export interface FloorStart {
  key: FloorKey | null;
  lowerings: number;
}

/** The floor a claim begins at, taken before the claim's statement is sent. */
export const floorStart = (floor: ClaimFloor): FloorStart => ({ key: floor.active ? floor.key : null, lowerings: floor.lowerings });

/**
 * 10 ms, four claims in a row, then a read of the head of 5 ms or more
 * (session 49). Under a held snapshot a claim from the head reads every
 * entry claimed since: at 1,000 jobs/s here, p50 start latency 11 ms in the
 * first held minute and 23 ms in the second (session49.txt, run P2). An idle
 * head reads one job in under a millisecond, so the read tells claims
 * slowed by a busy machine from a head full of dead entries, mostly: in
 * the conformance suites of PostgreSQL, MariaDB and SQLite run at once,
 * two reads followed slow claims, both in a case that keeps the event loop
 * busy, and both turned a floor on (it costs a job below it at most a
 * check: a check that reads the head under `offMs` turns it off). Thresholds
 * of 25 ms and 10 ms turned it on in minute 2 at 1,000 jobs/s (run P2), as
 * did session 47's 100 ms twice (run F; session48.txt, run L: p99 99–157 ms
 * in minutes 1–2). Earlier: one claim of 50 ms, a second of lag and checks
 * every max(1 s, 10×) kept p50 at 9–33 ms (session46.txt, run D); three
 * claims of 200 ms, two seconds and 4× let the head cost 90–230 ms p50
 * before the floor turned on, and stalled in minute 9 (run E). A check
 * between `offMs` and `slowMs` leaves the floor as it is, so a growing head
 * does not switch it off and on (run F, with no such band: 22 times in
 * minutes 1–3).
 */
export const FLOOR_TUNING: FloorTuning = { slowMs: 10, slowClaims: 4, confirmMs: 5, offMs: 5, lagMs: 1000, checkMs: 1000, checkFactor: 10 };

/** The floor of the claim of `key` (one queue), created off. */
export function floorOf(floors: Map<string, ClaimFloor>, key: string): ClaimFloor {
  let floor = floors.get(key);
  if (!floor) floors.set(key, (floor = { key: null, slowRun: 0, active: false, checkAt: 0, checking: false, confirm: false, lowerings: 0 }));
  return floor;
}

/**
 * After a claim that started at `started` (the floor it used, or null) and
 * took `elapsedMs`: `slowClaims` slow claims in a row from the head turn the
 * floor on, after a read of the head at least `confirmMs` slow confirms it
 * (checkFloor; at once with `confirmMs` 0); while on,
 * the floor moves up to `lagMs` before the first job claimed (claim order),
 * never down (only a check lowers it), and not at all if a check lowered it
 * while the claim ran: the jobs the check found are below where that claim
 * read, and the next claim must start at them (a claim in flight whenever a
 * check ended undid each lowering: under a steady stream of claims, a job
 * committed below the floor waited up to 94 s, not one check). A claim that could take no keyed job
 * (`keyedAllowed` false) passed keyed jobs over on purpose: the floor moves
 * only up to the first ready keyed job it passed, read between the two
 * (a short read: the entries there are the last claims'). A claim that read
 * jobs and left them ready (a cap or a rate limit held them back) names the
 * first of them in claim order, `passedOver`: the floor moves at most to it.
 */
export async function afterClaim(
  ctx: StoreContext,
  floor: ClaimFloor,
  started: FloorStart,
  elapsedMs: number,
  claimed: readonly JobRecord[],
  keyedAllowed: boolean,
  params: ClaimParams,
  tuning: FloorTuning,
  passedOver: FloorKey | null = null,
): Promise<void> {
  if (!floor.active && started.key === null) floor.slowRun = elapsedMs >= tuning.slowMs ? floor.slowRun + 1 : 0;
  if (!floor.active && floor.slowRun >= tuning.slowClaims) {
    floor.slowRun = 0;
    if (tuning.confirmMs > 0) floor.confirm = true;
    else turnOn(floor, params, tuning);
  }
  if (!floor.active || claimed.length === 0) return;
  let first = claimed[0]!;
  for (const j of claimed) if (compareKeys(j, first) < 0) first = j;
  let next: FloorKey = { priority: first.priority, runAt: first.runAt - tuning.lagMs, id: 0 };
  if (passedOver !== null && compareKeys(passedOver, next) < 0) next = passedOver;
  const from = floor.key;
  if (floor.lowerings !== started.lowerings || (from !== null && compareKeys(next, from) <= 0)) return;
  if (!keyedAllowed) next = (await firstReady(ctx, params, { from, below: next, keyed: true })) ?? next;
  // Read again after the read above: a check may have lowered the floor meanwhile.
  if (floor.lowerings !== started.lowerings || !floor.active) return;
  if (floor.key === null) tuning.observe?.({ queue: params.queues[0]!, change: "on", floor: next });
  if (floor.key === null || compareKeys(next, floor.key) > 0) floor.key = next;
}

function turnOn(floor: ClaimFloor, params: ClaimParams, tuning: FloorTuning): void {
  floor.active = true;
  floor.checkAt = params.now + tuning.checkMs;
}

/**
 * Where the engine reports its purge backlog (Engine.horizonBacklog), the
 * least that lets a confirming read turn the floor on: with no snapshot
 * held the backlog stayed at or under 1,248 at 1,200 jobs/s on MariaDB, and
 * a snapshot held at that rate passed 90,000 within its first minute
 * (bench/results/session50.txt).
 */
export const FLOOR_BACKLOG = 20_000;

/**
 * Starts the background check when one is due: reads the first ready job of
 * the claim's queue (and tasks) below the floor, unlocked, from the head.
 * Found: the floor goes down to it. None, and the read was faster than
 * `offMs`: the floor is turned off. `spawn` runs the check beside the
 * claims (its failure leaves the floor as it was, and the next check is due
 * `checkMs` later). When slow claims asked for one (`confirm`), it reads the
 * head once, and turns the floor on if that read took `confirmMs` or more
 * (and, where the engine reports its purge backlog, that is at least
 * FLOOR_BACKLOG):
 * claims slowed by a busy machine or a lock wait, with a head that reads
 * fast, leave it off (while it is on, a job that becomes ready below it
 * waits for a check).
 */
export function checkFloor(ctx: StoreContext, floor: ClaimFloor, params: ClaimParams, tuning: FloorTuning, spawn: (work: Promise<void>) => void): void {
  if (floor.checking) return;
  // A confirming read (of the head, unbounded) or a due check (below the floor).
  const confirming = floor.confirm && !floor.active;
  if (!confirming && (!floor.active || floor.key === null || params.now < floor.checkAt)) return;
  const below = confirming ? null : floor.key;
  floor.confirm = false;
  floor.checking = true;
  const started = performance.now();
  spawn(
    (async () => {
      try {
        const first = await firstReady(ctx, params, { from: null, below, keyed: false }, ctx.engine.capabilities.floorReadsLocked);
        const elapsed = performance.now() - started;
        if (confirming) {
          const backlog = ctx.engine.horizonBacklog ? await ctx.engine.horizonBacklog(ctx.db) : FLOOR_BACKLOG;
          if (elapsed >= tuning.confirmMs && backlog !== null && backlog >= FLOOR_BACKLOG) turnOn(floor, params, tuning);
          return;
        }
        floor.checkAt = params.now + Math.max(tuning.checkMs, tuning.checkFactor * elapsed);
        const queue = params.queues[0]!;
        if (first !== null) {
          if (floor.key !== null && compareKeys(first, floor.key) < 0) {
            floor.key = first;
            floor.lowerings++;
            tuning.observe?.({ queue, change: "lowered", floor: first, checkMs: elapsed });
          }
        } else if (elapsed < tuning.offMs) {
          floor.active = false;
          floor.key = null;
          tuning.observe?.({ queue, change: "off", floor: null, checkMs: elapsed });
        }
      } catch (error) {
        if (!confirming) floor.checkAt = params.now + tuning.checkMs;
        throw error;
      } finally {
        floor.checking = false;
      }
    })(),
  );
}

/**
 * The first ready job of the claim's one queue (and its tasks) in claim
 * order at or after `from` (if not null) and before `below` (if not null), keyed if
 * `keyed`; null if none. Read without a lock, or with `locked` as a claim
 * reads (FOR UPDATE SKIP LOCKED, a job another claim holds passed over) in
 * a transaction of its own, whose locks end with it.
 */
async function firstReady(ctx: StoreContext, params: ClaimParams, range: FirstReadyRange, locked = false): Promise<FloorKey | null> {
  const { rowLocks, skipLocked } = ctx.engine.capabilities;
  if (locked && rowLocks && skipLocked) return ctx.engine.writeTransaction(ctx.db, (db) => readFirst(ctx, db, params, range, true));
  return readFirst(ctx, ctx.db, params, range, false);
}

interface FirstReadyRange {
  from: FloorKey | null;
  below: FloorKey | null;
  keyed: boolean;
}

async function readFirst(ctx: StoreContext, db: AnyDb, params: ClaimParams, range: FirstReadyRange, lock: boolean): Promise<FloorKey | null> {
  const form = ctx.engine.capabilities.indexedRowBound || "row";
  const hinted = range.from !== null ? ctx.engine.forcedIndex?.(ctx.tables.jobs, "claim") : undefined;
  let q = guard(db.selectFrom(hinted ? (hinted as never) : ctx.tables.jobs).select(["priority", "run_at", "id"]), "claim", { now: params.now }).where("queue", "=", params.queues[0]!);
  if (hinted) q = onReadyIndex(ctx.engine, q, params.queues.slice(0, 1));
  if (range.below !== null) q = q.where(positionBound(form, "<", range.below));
  if (range.from !== null) q = q.where(positionBound(form, ">=", range.from));
  if (range.keyed) q = q.where("concurrency_key", "is not", null);
  if (params.tasks !== undefined) q = q.where("task", "in", [...params.tasks]);
  const read = inClaimOrder(q).limit(1);
  const rows = (await labelled(lock ? read.forUpdate().skipLocked() : read, "claim-floor-check").execute()) as { priority: number; run_at: number | string; id: number | string }[];
  const found = rows[0];
  return found === undefined ? null : { priority: Number(found.priority), runAt: Number(found.run_at), id: Number(found.id) };
}

/**
 * A read forced through `forcedIndex(…, "claim")` narrowed to `queues` by
 * the engine's `readyQueueColumn`, so its range is that index's (the column
 * leads it); the read unchanged where the engine has no such column.
 */
// deno-lint-ignore no-explicit-any
export function onReadyIndex<Q extends SelectQueryBuilder<any, any, any>>(engine: Engine, q: Q, queues: readonly string[]): Q {
  return engine.readyQueueColumn === undefined ? q : (q.where(engine.readyQueueColumn, "in", [...queues]) as Q);
}

/** A position's parts: numbers, or slots of a compiled statement (compiled.ts). */
export interface PositionValues {
  priority: unknown;
  runAt: unknown;
  id: unknown;
}

/**
 * `(priority, run_at, id) >= at` (or `< at`) in claim order, written in the
 * form the engine starts (or ends) a range of the claim index at
 * (Engine.capabilities.indexedRowBound): a row value, or term by term.
 */
export function positionBound(form: "row" | "terms", op: ">=" | "<", at: PositionValues): RawBuilder<boolean> {
  const [priority, runAt, id] = [sql.ref("priority"), sql.ref("run_at"), sql.ref("id")];
  if (form === "row") return sql<boolean>`(${priority}, ${runAt}, ${id}) ${sql.raw(op)} (${at.priority}, ${at.runAt}, ${at.id})`;
  const strict = sql.raw(op === ">=" ? ">" : "<");
  return sql<boolean>`(${priority} ${strict} ${at.priority} or (${priority} = ${at.priority} and ${runAt} ${strict} ${at.runAt}) or (${priority} = ${at.priority} and ${runAt} = ${at.runAt} and ${id} ${sql.raw(op)} ${at.id}))`;
}

export function compareKeys(a: FloorKey, b: FloorKey): number {
  return a.priority - b.priority || a.runAt - b.runAt || a.id - b.id;
}
