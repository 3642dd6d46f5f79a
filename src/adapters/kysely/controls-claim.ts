/**
 * The claim that applies controls (see claim.ts for when it runs): in one
 * transaction, pause, queue and task caps, rate limits, concurrency keys'
 * constrained share and fair queues' round-robin, decided by the core's
 * greedy rule (core/claim-order.ts) over candidates read under the control
 * rows' locks.
 */
import { sql, type ExpressionBuilder, type SelectQueryBuilder } from "kysely";
import type { ClaimParams } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { mergeByHeads } from "../../core/fairness.ts";
import { fairPick, writeTags } from "./fair-claim.ts";
import type { FairCandidate } from "../../core/fairness.ts";
import { byClaimOrder, claimedOrder, holdRate, rateRoomOf, rateSlack, takeWithinCaps, type ClaimCandidate, type ClaimRoom } from "../../core/claim-order.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { guard } from "./guard.ts";
import { claimedRecords, inClaimOrder, type JobRow } from "./row.ts";
import type { QueueRow, TaskRow } from "./controls.ts";
import { RATE_COLUMNS, heldLimit, lockRateKeys, logTaken, roomOf, slackOf, takenLog, type HeldLimit } from "./rate-limits.ts";
import { claimedAt, delayingLimit, readStarts, type RateScope } from "../../core/rate-limit.ts";
import { labelComment, labelled } from "./labels.ts";
import { locksAreLocal, writeGuards } from "./guard-writes.ts";
import { CAPS_MEMORY_MS, claimedRow, claimSet, countedControl, unkeyed, type ClaimMemory } from "./claim-parts.ts";
import { claimHeldRate } from "./claim-statement.ts";
import { compareKeys, onReadyIndex, positionBound, type FloorKey } from "./claim-floor.ts";

/**
 * A claim when some control may apply: in one transaction, the control
 * rows of the claim's capped queues are locked exclusively (their room is
 * counted), the others shared; candidates are picked by the greedy cap
 * rule, taking at most `constrained` keyed jobs and jobs of capped queues
 * and tasks; capped tasks' rows are locked exclusively as candidates reach
 * them. With `constrained` 0, capped queues and tasks are left alone: every
 * control row is read shared and no room is counted.
 */
export async function claimWithControls(ctx: StoreContext, memory: ClaimMemory, params: ClaimParams, constrained: number, floor?: FloorUse): Promise<JobRecord[]> {
  // No cap met lately: expect none, and lock every queue's control row shared in one read; a cap found
  // there (set since) rolls this transaction back and the claim runs again with the capped rows locked exclusively.
  // Where locks are local to a server, every queue row is locked exclusively (see lockQueueControls): nothing to expect.
  const expectNoCaps = !locksAreLocal(ctx) && params.now - memory.capsSeenAt >= CAPS_MEMORY_MS;
  try {
    return await claimUnderControls(ctx, memory, params, constrained, expectNoCaps, floor);
  } catch (error) {
    if (error !== CAPS_FOUND) throw error;
    memory.capsSeenAt = params.now;
    return claimUnderControls(ctx, memory, params, constrained, false, floor);
  }
}

/**
 * A claim's floor (claim-floor.ts), for a claim of one queue: `from`, where
 * its read starts (null: the head). The claim says whether it read from
 * there (`read`: the queue has no control of its own, as the one-statement
 * claim's queues, so its jobs were read in claim order from `from`), and
 * the first job in claim order it read and left ready (`passedOver`: a task
 * cap or rate limit held it back), below which the floor must not move.
 */
export interface FloorUse {
  from: FloorKey | null;
  read: boolean;
  passedOver: FloorKey | null;
}

/** The columns a candidate read adds: its task's cap and rate limit. */
const TASK_CAP = "docket_task_cap";
const TASK_RATE = "docket_task_rate";

/** Whether a queue or task row has a control that a claim counts under its exclusive lock: a cap or a rate limit. */
const counted = (r: { max_running: unknown; rate_limit?: unknown }): boolean => r.max_running !== null || (r.rate_limit ?? null) !== null;

/** A rate limit a claim holds locked (its `heldUntil` as read: logTaken writes the new one, not this), what it limits, where its room is kept, its room when locked. */
interface LimitInRoom {
  held: HeldLimit;
  scope: RateScope;
  map: Map<string, number>;
  initial: number;
}

/**
 * The most jobs a claim takes when it holds a fair queue's row exclusively
 * (an engine without `exactSkipLocked`, where a fair queue's claims take
 * turns): the queue's other claimers wait for it, and a job placed at the
 * queue's head meanwhile waits for the claim after it, so a worker's
 * prefetch of up to 2,000 jobs held them for seconds. MariaDB,
 * bench/fairness.ts, 3 runs each (bench/results/session45.txt): small keys'
 * p99 start latency under the flood ÷ idle 6.1–8.3× with no such bound,
 * 1.1–1.8× with this one; the flood's rate 0.75–0.84× and 0.70–0.85× of the
 * same without keys. (A bound of 400 gave 1.4–2.0×, 800 1.8–4.0×.)
 */
const TURN_CLAIM_MAX = 200;

/**
 * Whether a fair queue's claims take turns on its control row (locked
 * exclusively, see lockQueueControls): where a locked read may lock rows it
 * only scanned (no `exactSkipLocked`: MariaDB).
 */
const fairClaimsTakeTurns = (ctx: StoreContext): boolean => !ctx.engine.capabilities.exactSkipLocked;

/** Thrown inside a claim that expected no caps and found one: its transaction rolls back. */
const CAPS_FOUND = new Error("a queue cap was found by a claim that expected none");

function claimUnderControls(ctx: StoreContext, memory: ClaimMemory, params: ClaimParams, constrained: number, expectNoCaps: boolean, floor?: FloorUse): Promise<JobRecord[]> {
  const { tables, engine } = ctx;
  return engine.writeTransaction(ctx.db, async (db) => {
    if (floor) [floor.read, floor.passedOver] = [false, null];
    const local = locksAreLocal(ctx);
    // With no room for constrained jobs, control rows are read shared, unless a queue is known rate-limited (without a
    // cap): its slack may still be taken, under its row's exclusive lock (taken as lockCapped takes them, in name order).
    const rateKnown = params.queues.some((q) => memory.rateQueues.has(q));
    const mode = constrained === 0 && !local && !rateKnown ? "shared" : expectNoCaps && constrained > 0 ? "expectNoCaps" : "lockCapped";
    const queueRows = await lockQueueControls(ctx, db, params.queues, mode);
    const paused = new Set(queueRows.filter((r) => Number(r.paused) === 1).map((r) => r.name));
    const capped = queueRows.filter((r) => counted(r) && !paused.has(r.name));
    if (capped.length > 0 || queueRows.some((r) => Number(r.keyed_rate ?? 0) === 1)) memory.capsSeenAt = params.now;
    const fairQueues = new Set(queueRows.filter((r) => Number(r.fair ?? 0) === 1 && !paused.has(r.name)).map((r) => r.name));
    const prioritized = new Set(queueRows.filter((r) => Number(r.fair_priorities ?? 0) === 1).map((r) => r.name));
    for (const r of queueRows) if (Number(r.fair ?? 0) === 1) ctx.fairQueues.fair.add(r.name);
    for (const name of prioritized) ctx.fairQueues.prioritized.add(name);
    // A prioritized fair queue's claims always need this transaction; a plain fair queue's need the one statement only when it knows the queue fair.
    if ([...fairQueues].some((q) => prioritized.has(q))) memory.capsSeenAt = params.now;
    const uncapped = params.queues.filter((q) => !paused.has(q) && !capped.some((r) => r.name === q) && !fairQueues.has(q));
    const fairUncapped = [...fairQueues].filter((q) => !capped.some((r) => r.name === q));
    // One queue with no control of its own (as the one-statement claim's): its candidates are read from the floor.
    const bound = ctx.engine.capabilities.indexedRowBound;
    const floored = floor !== undefined && bound !== false && params.queues.length === 1 && uncapped.length === 1 && !queueRows.some((r) => Number(r.keyed_rate ?? 0) === 1);
    const readFrom = floored ? floor.from : null;
    const positions = new Map<number, FloorKey>();
    // Where a fair queue's claims take turns on its row (see lockQueueControls), one takes at most TURN_CLAIM_MAX
    // jobs, or as many as the worker has free handlers for (`constrainedLimit`): only its prefetch is cut.
    const turnMax = Math.max(TURN_CLAIM_MAX, params.constrainedLimit ?? 0);
    const limit = fairQueues.size > 0 && fairClaimsTakeTurns(ctx) ? Math.min(params.limit, turnMax) : params.limit;
    const rates = rateRoomOf();
    const room: ClaimRoom = { queues: new Map(), tasks: new Map(), constrained, rates, takenConstrained: new Set() };
    const limits: LimitInRoom[] = [];
    const hold = (held: HeldLimit | null, scope: RateScope, map: Map<string, number>) => {
      if (held === null) return;
      const initial = roomOf(held, params.now);
      holdRate(rates, scope, held.name, initial, slackOf(held, params.now));
      limits.push({ held, scope, map, initial });
    };
    // Counted apart from the candidate read, which then locks only as many of the queue's jobs as it may take.
    for (const r of queueRows) {
      if (r.max_running !== null) memory.capped.queues.add(r.name);
      else memory.capped.queues.delete(r.name);
    }
    for (const r of capped) {
      const rateOnly = r.max_running === null && r.rate_limit !== null;
      if (rateOnly) memory.rateQueues.add(r.name);
      else memory.rateQueues.delete(r.name);
      if (constrained > 0) {
        if (r.max_running !== null) room.queues.set(r.name, Number(r.max_running) - (await countRunning(ctx, db, "queue", r.name)));
        hold(heldLimit(tables.queues, r), "queue", rates.queues);
      } else if (rateOnly && mode !== "shared") {
        // Locked exclusively (see lockQueueControls): its slack may be taken.
        hold(heldLimit(tables.queues, r), "queue", rates.queues);
      }
    }
    const fast = await slackClaim(ctx, db, memory, params, constrained, queueRows, limits);
    if (Array.isArray(fast)) return fast;
    // The greedy rule, in claim order: take a ready job unless its queue's or its task's cap is full, or it
    // is constrained and `constrained` of them are taken. Such a job must not hide the jobs behind it, so
    // passes repeat without the exhausted tasks (and, once no constrained job may be taken, without keyed
    // jobs, capped queues and capped tasks) until the limit is reached or nothing is left.
    const checkedTasks = new Set<string>();
    const cappedTasks = new Set<string>();
    const exhausted = new Set<string>();
    const chosen: number[] = [];
    // Without RETURNING, candidates are read whole under their row locks: the claimed records are made from them.
    const readWhole = !engine.capabilities.returning && engine.capabilities.rowLocks;
    const whole = new Map<number, JobRow>();
    // The queue and task of each candidate read: where locks are local, those of the chosen jobs are guard-written.
    const placeOf = new Map<number, { queue: string; task: string }>();
    for (;;) {
      const need = limit - chosen.length;
      const spent = room.constrained <= 0;
      if (spent) for (const task of [...room.tasks.keys(), ...rates.tasks.keys()]) if (!((rates.slack.tasks.get(task) ?? 0) > 0)) exhausted.add(task);
      const groups: { queues: string[]; limit: number }[] = [];
      if (uncapped.length > 0) groups.push({ queues: uncapped, limit: need });
      for (const name of fairUncapped) groups.push({ queues: [name], limit: need });
      // A capped queue's jobs are constrained; a rate-limited one's too, beyond its slack (see isConstrained).
      for (const { name } of capped) {
        const left = Math.min(room.queues.get(name) ?? Infinity, rates.queues.get(name) ?? Infinity);
        const takeable = Math.max(0, room.constrained) + rateSlack(room, name);
        if (left > 0 && takeable > 0) groups.push({ queues: [name], limit: Math.min(left, need, takeable) });
      }
      if (need <= 0 || groups.length === 0) break;
      const plain: ClaimCandidate[] = [];
      const served: FairCandidate[][] = [];
      const retags: ((chosen: ReadonlySet<number>) => Map<number, number>)[] = [];
      const newKeys = new Set<string>();
      /** A candidate row read: its controls noted, the candidate made. */
      const seen = (row: Record<string, any>): FairCandidate => {
        const { [TASK_CAP]: taskCap, [TASK_RATE]: taskRate, ...r } = row;
        const rateKey = r.rate_key ?? null;
        if ((taskCap ?? null) !== null || (taskRate ?? null) !== null) cappedTasks.add(r.task);
        if (rateKey !== null && !spent && !rates.keys.has(rateKey)) newKeys.add(rateKey);
        if (readWhole) whole.set(Number(r.id), r as JobRow);
        if (local) placeOf.set(Number(r.id), { queue: r.queue, task: r.task });
        if (floored) positions.set(Number(r.id), { priority: Number(r.priority), runAt: Number(r.run_at), id: Number(r.id) });
        const fairTag = r.fair_tag === null || r.fair_tag === undefined ? null : Number(r.fair_tag);
        return { id: Number(r.id), task: r.task, queue: r.queue, priority: Number(r.priority), runAt: Number(r.run_at), concurrencyKey: r.concurrency_key ?? null, rateKey, fairKey: r.fair_key ?? null, fairTag };
      };
      /** The claimable ready jobs of `queues`, filtered as this pass filters them, in claim order; with `ids`, only those, read by primary key. */
      const candidateQuery = (queues: string[], ids?: readonly number[]) => {
        const index = ids !== undefined ? "primary" : readFrom !== null ? "claim" : null;
        const from = index !== null && engine.forcedIndex ? db.selectFrom(engine.forcedIndex(tables.jobs, index) as never) : db.selectFrom(tables.jobs);
        // deno-lint-ignore no-explicit-any
        let columns: SelectQueryBuilder<any, any, any> = readWhole ? from.selectAll() : from.select(["id", "task", "queue", "priority", "run_at", "concurrency_key", "rate_key", "fair_key", "fair_tag"]);
        // Read with the candidates, unlocked: their tasks' caps and rate limits (such a task is then locked and counted by `taskRoom`).
        const taskColumn = (column: string, as: string) => (eb: ExpressionBuilder<any, any>) => eb.selectFrom(tables.tasks).select(column).where("name", "=", sql.ref(`${tables.jobs}.task`)).as(as);
        columns = columns.select(taskColumn("max_running", TASK_CAP)).select(taskColumn("rate_limit", TASK_RATE));
        let q = guard(columns, "claim", { now: params.now }).where("queue", "in", queues);
        if (index === "claim") q = onReadyIndex(engine, q, queues);
        if (spent) q = unkeyed(q).where("rate_key", "is", null);
        else if (rates.spentKeys.size > 0) q = q.where((eb) => eb.or([eb("rate_key", "is", null), eb("rate_key", "not in", [...rates.spentKeys])]));
        if (chosen.length > 0) q = q.where("id", "not in", chosen);
        if (params.tasks !== undefined) q = q.where("task", "in", [...params.tasks]);
        if (exhausted.size > 0) q = q.where("task", "not in", [...exhausted]);
        if (ids !== undefined) q = q.where("id", "in", [...ids]);
        else if (readFrom !== null) q = q.where(positionBound(bound || "row", ">=", readFrom));
        return inClaimOrder(q);
      };
      for (const g of groups) {
        const queue = g.queues[0]!;
        if (g.queues.length === 1 && fairQueues.has(queue)) {
          const pick = await fairPick(ctx, db, queue, g.limit, prioritized.has(queue), candidateQuery, seen);
          served.push(pick.candidates);
          if (pick.retag) retags.push(pick.retag);
          continue;
        }
        const read = readFrom !== null && !engine.capabilities.exactSkipLocked && engine.capabilities.skipLocked ? readWindows : readCandidates;
        for (const r of await read(ctx, db, g, candidateQuery)) plain.push(seen(r));
      }
      // Fair queues' candidates in their fair order, merged with the others' (claim order) by their heads.
      const candidates = mergeByHeads([plain.sort(byClaimOrder), ...served]);
      if (candidates.length === 0) break;
      const unseen = [...new Set(candidates.map((c) => c.task))].filter((t) => !checkedTasks.has(t) && cappedTasks.has(t));
      const tasksRoom = await taskRoom(ctx, db, unseen, !spent);
      for (const [task, left] of tasksRoom.caps) {
        room.tasks.set(task, left);
        memory.capped.tasks.add(task);
      }
      for (const [task, held] of tasksRoom.limits) {
        if (held === null) rates.tasks.set(task, 0);
        else hold(held, "task", rates.tasks);
      }
      if (tasksRoom.caps.size + tasksRoom.limits.size > 0) memory.capsSeenAt = params.now;
      for (const t of unseen) checkedTasks.add(t);
      for (const held of await lockRateKeys(ctx, db, [...newKeys].sort())) hold(held, "key", rates.keys);
      const passedOver = takeWithinCaps(candidates, limit, room, chosen, exhausted);
      // The tags of the prioritized queues' jobs this pass read, written before the next pass reads them again.
      for (const retag of retags) await writeTags(ctx, db, retag(new Set(chosen)));
      if (!passedOver) break;
    }
    // The claimed jobs' start (startedAt) is when their limits log it (see claimedAt); the rest of the claim keeps params.now.
    const startedAt = claimedAt(limits.map((l) => ({ log: readStarts(l.held.starts), count: l.initial - l.map.get(l.held.name)! })), params.now);
    await logStarts(ctx, db, limits, params);
    if (floored) {
      const taken = new Set(chosen);
      let first: FloorKey | null = null;
      for (const [id, at] of positions) if (!taken.has(id) && (first === null || compareKeys(at, first) < 0)) first = at;
      [floor.read, floor.passedOver] = [true, first];
    }
    if (chosen.length === 0) return [];
    if (fast === "missed") memory.slackMissedAt = params.now;
    if (local) {
      // The control rows this claim's choice relied on (pause, caps, rate limits, fair turns), written: a claim or a
      // control change on another server that relied on or changed one of them cannot also commit.
      await writeGuards(ctx, db, tables.queues, "name", chosen.map((id) => placeOf.get(id)!.queue));
      await writeGuards(ctx, db, tables.tasks, "name", chosen.map((id) => placeOf.get(id)!.task));
    }
    const update = labelled(guard(db.updateTable(tables.jobs).set(claimSet(params, startedAt)).where("id", "in", chosen), "claim", { now: params.now, byId: true }), "claim");
    let rows: JobRow[];
    if (engine.capabilities.returning) {
      rows = (await update.returningAll().execute()) as JobRow[];
    } else {
      const updated = Number((await update.executeTakeFirst()).numUpdatedRows);
      // The chosen rows are locked by this transaction since they were read: the UPDATE moved each of them as read.
      rows =
        readWhole && updated === chosen.length
          ? chosen.map((id) => claimedRow(whole.get(id)!, params, startedAt))
          : ((await db.selectFrom(tables.jobs).selectAll().where("id", "in", chosen).where("lease_token", "=", params.leaseToken).execute()) as JobRow[]);
    }
    const records = claimedRecords(rows);
    nameDelays(records, limits);
    return claimedOrder(records, params.constrainedLimit === undefined ? null : (j) => room.takenConstrained!.has(j.id));
  });
}

/**
 * A claim of one queue whose only control is a rate limit, when the limit's
 * slack (core rateSlack) covers every job the claim may take: the jobs a
 * claim takes then are unconstrained but for their concurrency keys, so
 * the one-statement claim (claim-statement.ts `claimHeldRate`) takes them, at most
 * min(limit, the limit's room), in this transaction, which holds the queue
 * row locked exclusively; their starts are logged as the greedy rule's
 * would be. Returns the claimed jobs; null where it does not apply;
 * "missed" where the statement claimed nothing (no job ready, or a task
 * control stopped it). Either way the caller then applies the greedy rule,
 * and after a miss that the greedy rule followed with jobs, this is not
 * tried for CAPS_MEMORY_MS.
 */
async function slackClaim(
  ctx: StoreContext,
  db: AnyDb,
  memory: ClaimMemory,
  params: ClaimParams,
  constrained: number,
  queueRows: readonly QueueRow[],
  limits: readonly LimitInRoom[],
): Promise<JobRecord[] | "missed" | null> {
  const { claimStatement, returning } = ctx.engine.capabilities;
  if (!claimStatement || !returning || locksAreLocal(ctx) || params.queues.length !== 1 || queueRows.length !== 1 || limits.length !== 1) return null;
  const row = queueRows[0]!;
  if (Number(row.paused) === 1 || row.max_running !== null || Number(row.keyed_rate ?? 0) === 1 || Number(row.fair ?? 0) === 1) return null;
  if (params.now - memory.slackMissedAt < CAPS_MEMORY_MS) return null;
  const limit = limits[0]!;
  const most = Math.min(params.limit, limit.initial);
  if (most <= 0 || slackOf(limit.held, params.now) < most) return null;
  const startedAt = claimedAt([{ log: readStarts(limit.held.starts), count: most }], params.now);
  // Where the statement can write the limit's row too, it logs `most` starts; a claim that took fewer logs its own count after it.
  const planned = ctx.engine.capabilities.arrays ? takenLog(limit.held, params.now, most, limit.initial - most <= 0) : null;
  const log = planned && { table: limit.held.table, name: limit.held.name, set: planned.set };
  const records = await claimHeldRate(ctx, db, { ...params, limit: most }, Math.min(constrained, most), { startedAt, ...(log ? { log } : {}) });
  if (records.length === 0) return "missed";
  limit.map.set(limit.held.name, limit.initial - records.length);
  if (planned !== null && records.length === most) {
    limit.held.starts = planned.starts;
    if (planned.until !== null) params.onRateLimited?.(planned.until);
  } else await logStarts(ctx, db, limits, params);
  nameDelays(records, limits);
  return records;
}

/** Names on each claimed record the limit among `limits` that held it back (JobRecord.delayedBy; core `delayingLimit`, from the values read before the claim wrote any). */
function nameDelays(records: JobRecord[], limits: readonly LimitInRoom[]): void {
  if (limits.length === 0) return;
  const held = limits.map((l) => ({ scope: l.scope, name: l.held.name, heldUntil: l.held.heldUntil }));
  for (const r of records) {
    const delayedBy = delayingLimit(r, held);
    if (delayedBy !== null) r.delayedBy = delayedBy;
  }
}

/**
 * The control rows of `queues`, locked for the rest of the transaction:
 * capped or rate-limited ones exclusively (in name order; their room is
 * counted under the lock), the rest shared, so claims of uncapped queues do not wait for each
 * other while a pause or cap change waits for them. A row that gained a
 * cap between the two reads is reported paused: this claim leaves it alone.
 * With `expectNoCaps`, every row is read shared in one statement, and an
 * unpaused capped row throws CAPS_FOUND; with `shared` (a claim that takes
 * no job of a capped queue), every row is read shared in one statement.
 * Where a locked read may lock rows it does not return (no
 * `exactSkipLocked`: MariaDB), a fair queue's row is locked exclusively as
 * a capped one's: its claims take turns, so none passes over the jobs
 * another one's reads only scanned (and comes back empty while jobs wait).
 * Where locks are local to a server (Engine.locksAreLocal), every row is
 * locked exclusively, and the claim writes the rows of the queues it takes
 * jobs from (guard-writes.ts).
 */
async function lockQueueControls(ctx: StoreContext, db: AnyDb, queues: readonly string[], mode: "lockCapped" | "expectNoCaps" | "shared"): Promise<QueueRow[]> {
  const serialFair = fairClaimsTakeTurns(ctx);
  const local = locksAreLocal(ctx);
  const exclusive = (r: QueueRow) => local || counted(r) || (serialFair && Number(r.fair ?? 0) === 1);
  const read = () =>
    db
      .selectFrom(ctx.tables.queues)
      .select(["name", "paused", "max_running", "keyed_rate", "fair", "fair_priorities", ...RATE_COLUMNS])
      .where("name", "in", [...queues])
      .orderBy("name");
  if (!ctx.engine.capabilities.rowLocks) return (await read().execute()) as QueueRow[];
  if (mode === "expectNoCaps") {
    const rows = (await ctx.engine.shareLock(read()).execute()) as QueueRow[];
    if (rows.some((r) => exclusive(r) && Number(r.paused) !== 1)) throw CAPS_FOUND;
    return rows;
  }
  if (mode === "shared") {
    // The fair queues this store knows, whose claims take turns, exclusively first (a shared lock is never upgraded:
    // two claims could each wait for the other's); a row found fair only now is known from the next claim on.
    const known = serialFair ? queues.filter((q) => ctx.fairQueues.fair.has(q)) : [];
    const fair = known.length === 0 ? [] : ((await read().where("name", "in", known).forUpdate().execute()) as QueueRow[]);
    const others = fair.length > 0 ? read().where("name", "not in", fair.map((r) => r.name)) : read();
    const rest = fair.length === queues.length ? [] : ((await ctx.engine.shareLock(others).execute()) as QueueRow[]);
    return [...fair, ...rest].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
  const capped = (await read()
    .where((eb) => (local ? sql<boolean>`1 = 1` : serialFair ? eb.or([countedControl(eb), eb("fair", "=", 1)]) : countedControl(eb)))
    .forUpdate()
    .execute()) as QueueRow[];
  const cappedNames = new Set(capped.map((r) => r.name));
  if (queues.every((q) => cappedNames.has(q))) return capped;
  const others = (await ctx.engine.shareLock(read()).execute()) as QueueRow[];
  const rest = others.filter((r) => !cappedNames.has(r.name)).map((r) => (exclusive(r) ? { ...r, paused: 1 } : r));
  return [...capped, ...rest];
}

/**
 * Remaining room per capped task among `tasks` (`caps`), and the rate
 * limits among them (`limits`), with the task control rows locked in name
 * order; without `count` (a claim that takes no constrained job), room 0
 * for each cap and a null limit (no room) for each rate limit of a capped
 * task, read without locks or counts, and the limits of the other
 * rate-limited tasks locked (their slack may be taken, see isConstrained).
 */
async function taskRoom(
  ctx: StoreContext,
  db: AnyDb,
  tasks: string[],
  count: boolean,
): Promise<{ caps: Map<string, number>; limits: Map<string, HeldLimit | null> }> {
  const caps = new Map<string, number>();
  const limits = new Map<string, HeldLimit | null>();
  if (tasks.length === 0) return { caps, limits };
  let q = db
    .selectFrom(ctx.tables.tasks)
    .select(["name", "max_running", ...RATE_COLUMNS])
    .where("name", "in", tasks)
    .where(countedControl)
    .orderBy("name");
  const locks = ctx.engine.capabilities.rowLocks;
  if (count && locks) q = q.forUpdate();
  let rows = (await q.execute()) as TaskRow[];
  const rateOnly = (r: TaskRow) => r.max_running === null && r.rate_limit !== null;
  if (!count && locks && rows.some(rateOnly)) {
    const locked = (await q.where("name", "in", rows.filter(rateOnly).map((r) => r.name)).forUpdate().execute()) as TaskRow[];
    rows = [...rows.filter((r) => !rateOnly(r)), ...locked];
  }
  for (const r of rows) {
    if (r.max_running !== null) caps.set(r.name, count ? Number(r.max_running) - (await countRunning(ctx, db, "task", r.name)) : 0);
    const held = heldLimit(ctx.tables.tasks, r);
    if (held !== null) limits.set(r.name, count || rateOnly(r) ? held : null);
  }
  return { caps, limits };
}

/**
 * Logs the starts this claim took of each limit it holds, and when each it
 * left with no room next has some (see JobRecord.delayedBy), and tells the
 * caller (`onRateLimited`) when the earliest of them has room again.
 */
async function logStarts(ctx: StoreContext, db: AnyDb, limits: readonly LimitInRoom[], params: ClaimParams): Promise<void> {
  let heldUntil = Number.POSITIVE_INFINITY;
  for (const { held, map, initial } of limits) {
    const left = map.get(held.name)!;
    const until = await logTaken(ctx, db, held, params.now, initial - left, left <= 0);
    if (until !== null) heldUntil = Math.min(heldUntil, until);
  }
  if (heldUntil !== Number.POSITIVE_INFINITY) params.onRateLimited?.(heldUntil);
}

/** How many jobs of a queue or task are running, not counting any this claim has not written yet. */
async function countRunning(ctx: StoreContext, db: AnyDb, column: "queue" | "task", value: string): Promise<number> {
  const r = await db
    .selectFrom(ctx.tables.jobs)
    .select((eb: ExpressionBuilder<any, any>) => eb.fn.countAll().as("n"))
    .where(column, "=", value)
    .where("state", "=", "running")
    .executeTakeFirst();
  return Number(r?.n ?? 0);
}

/** How many windows a floored read (`readWindows`) reads at most. */
const FLOOR_WINDOWS = 3;

/**
 * A floored read (claim-floor.ts) where a locked read of the claim index
 * is slow under an old snapshot and an unlocked one is not (no
 * `exactSkipLocked`: MariaDB; bench/results/session50.txt: 481,535 pages
 * and 210–256 ms locked against 1,447 pages and 15–30 ms unlocked for the
 * same range): a window of the first `g.limit` candidates read unlocked
 * from the floor, then its rows read again by primary key, locked `FOR
 * UPDATE SKIP LOCKED` with every filter checked on their newest version,
 * so a job another claim holds or took since is passed over. While windows
 * come back full and rows are missing, the next window (past the ids
 * tried) is read, at most FLOOR_WINDOWS. Returns the locked rows.
 */
async function readWindows(
  ctx: StoreContext,
  db: AnyDb,
  g: { queues: string[]; limit: number },
  // deno-lint-ignore no-explicit-any
  candidateQuery: (queues: string[], ids?: readonly number[]) => SelectQueryBuilder<any, any, any>,
  // deno-lint-ignore no-explicit-any
): Promise<Record<string, any>[]> {
  // deno-lint-ignore no-explicit-any
  const rows: Record<string, any>[] = [];
  const tried: number[] = [];
  for (let pass = 0; pass < FLOOR_WINDOWS && rows.length < g.limit; pass++) {
    const need = g.limit - rows.length;
    let window = candidateQuery(g.queues).clearSelect().select("id").limit(need);
    if (tried.length > 0) window = window.where("id", "not in", tried);
    const ids = ((await labelled(window, "claim-window").execute()) as { id: unknown }[]).map((r) => Number(r.id));
    if (ids.length === 0) break;
    tried.push(...ids);
    rows.push(...(await labelled(candidateQuery(g.queues, ids).forUpdate().skipLocked(), "claim-candidates").execute()));
    if (ids.length < need) break;
  }
  return rows;
}

/**
 * The first `g.limit` claimable ready jobs of `g.queues` in claim order,
 * locked (`FOR UPDATE SKIP LOCKED` where the engine has it). A locking read
 * that must sort (one ordered across several queues) locks on MariaDB every
 * row it reads before its LIMIT applies (`exactSkipLocked` false): one claim
 * of a job would hold every ready job of its queues and other claimers would
 * find none. There, ONE statement reads each queue in index order, `(… queue
 * IN (q1) … LIMIT n FOR UPDATE SKIP LOCKED) UNION ALL (…)`, locking at most
 * `g.limit` rows per queue, and the first `g.limit` of them in claim order
 * are returned (the others stay ready: nothing writes them). PostgreSQL
 * locks only what the LIMIT returns, but its read across queues sorts every
 * ready job of them (a claim of 100 behind 100,000: 37 ms against 2 ms for
 * one queue); it reads the same parts, each a derived table (PostgreSQL
 * refuses a locking clause on a UNION's member).
 */
async function readCandidates(
  ctx: StoreContext,
  db: AnyDb,
  g: { queues: string[]; limit: number },
  // deno-lint-ignore no-explicit-any
  candidateQuery: (queues: string[]) => SelectQueryBuilder<any, any, any>,
  // deno-lint-ignore no-explicit-any
): Promise<Record<string, any>[]> {
  const { skipLocked, exactSkipLocked } = ctx.engine.capabilities;
  const locked = (queues: string[]) => {
    const q = candidateQuery(queues).limit(g.limit);
    return skipLocked ? q.forUpdate().skipLocked() : q;
  };
  if (g.queues.length === 1 || !skipLocked) return labelled(locked(g.queues), "claim-candidates").execute();
  const part = (queue: string, i: number) => (exactSkipLocked ? sql`select * from (${locked([queue])}) as ${sql.raw(`rq${i}`)}` : sql`(${locked([queue])})`);
  const parts = sql.join(g.queues.map(part), sql` union all `);
  // deno-lint-ignore no-explicit-any
  const rows = (await sql<Record<string, any>>`${parts} ${sql.raw(labelComment("claim-candidates"))}`.execute(db)).rows;
  const order = (r: Record<string, unknown>) => ({ priority: Number(r.priority), runAt: Number(r.run_at), id: Number(r.id) });
  return rows.sort((a, b) => byClaimOrder(order(a), order(b))).slice(0, g.limit);
}
