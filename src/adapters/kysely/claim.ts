import { sql, type ExpressionBuilder, type SelectQueryBuilder } from "kysely";
import type { ClaimParams } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { TRANSITIONS } from "../../core/transitions.ts";
import { mergeByHeads } from "../../core/fairness.ts";
import { FairClaim, fairPick } from "./fair-claim.ts";
import { byClaimOrder, claimedOrder, claimLimits, isConstrained, rateRoomOf, takeWithinCaps, type ClaimCandidate, type ClaimRoom } from "../../core/claim-order.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { guard } from "./guard.ts";
import { compiledOnce, Slot } from "./compiled.ts";
import { stageDue } from "./admission.ts";
import { inClaimOrder, rowToRecord, type JobRow } from "./row.ts";
import type { QueueRow, TaskRow } from "./controls.ts";
import { RATE_COLUMNS, heldLimit, lockRateKeys, logTaken, roomAt, roomOf, type HeldLimit } from "./rate-limits.ts";
import { labelled } from "./labels.ts";

/** How long after a claim met a cap the next claims go straight to the transaction that applies caps. */
export const CAPS_MEMORY_MS = 1000;

/** What one store remembers between claims: when a claim last met a cap on its queues or tasks. */
export interface ClaimMemory {
  capsSeenAt: number;
}

export function claimMemory(): ClaimMemory {
  return { capsSeenAt: Number.NEGATIVE_INFINITY };
}

/**
 * See DocketAdapter.claim. Stages due jobs first (unless told not to), then
 * claims with one statement when the engine can and no cap was met lately;
 * when that finds nothing (or caps apply), with the transaction that applies
 * pause and caps by the core's greedy rule. Either way at most
 * `constrainedLimit` of the jobs are constrained (keyed, or of a capped
 * queue or task).
 */
export async function claim(ctx: StoreContext, memory: ClaimMemory, params: ClaimParams): Promise<JobRecord[]> {
  const constrained = claimLimits(params);
  if (params.limit <= 0 || params.queues.length === 0 || params.tasks?.length === 0) return [];
  if (params.stage !== false) await stageDue(ctx, params.now);
  if (ctx.engine.capabilities.claimStatement && params.now - memory.capsSeenAt >= CAPS_MEMORY_MS) {
    const claimed = await ctx.engine.writeStatement(ctx.db, (db) => claimUncapped(ctx, db, params, constrained));
    if (claimed.length > 0) return claimed;
    // Nothing claimed: no job was ready, or a cap kept the statement from claiming. Only the latter needs the transaction.
    if (!(await capsApply(ctx, params))) return [];
  }
  return claimWithControls(ctx, memory, params, constrained);
}

/** A queue or task control row with a control a claim counts under the row's exclusive lock: a cap or a rate limit. */
// deno-lint-ignore no-explicit-any
export const countedControl = (eb: ExpressionBuilder<any, any>) => eb.or([eb("max_running", "is not", null), eb("rate_limit", "is not", null)]);

/** A queue control row whose claims need the controls transaction: counted (above), or it has held rate-keyed or fairness-keyed jobs. */
// deno-lint-ignore no-explicit-any
const controlledQueue = (eb: ExpressionBuilder<any, any>) => eb.or([countedControl(eb), eb("keyed_rate", "=", 1), eb("fair", "=", 1)]);

/**
 * Whether a control stops the one-statement claim: an unpaused queue among
 * the claim's queues with a cap or a rate limit or rate-keyed jobs, or that
 * is fair (has held fairness-keyed jobs), or a
 * task among its tasks (any task when the claim names none) with a cap or
 * a rate limit, as that statement tests it.
 */
async function capsApply(ctx: StoreContext, params: ClaimParams): Promise<boolean> {
  const { db, tables } = ctx;
  const build = () => {
    let tasks = db.selectFrom(tables.tasks).select(sql<number>`1`.as("capped")).where(countedControl);
    if (params.tasks !== undefined) tasks = tasks.where("name", "in", [...params.tasks]);
    return db
      .selectFrom(tables.queues)
      .select(sql<number>`1`.as("capped"))
      .where("name", "in", [...params.queues])
      .where(controlledQueue)
      .where("paused", "=", 0)
      .unionAll(tasks)
      .limit(1);
  };
  const compiled = compiledOnce(ctx.statements, JSON.stringify(["caps", params.queues, params.tasks ?? null]), build, {}, ctx.engine.prepare);
  return (await db.executeQuery(compiled)).rows.length > 0;
}

/**
 * The columns a claim sets besides the attempt: running under the claim's lease, by the claiming worker,
 * and no longer holding a debounce key (a merge never reaches a job that ran, also once it is retried,
 * released or replayed: see NewJob.debounce).
 */
function claimedValues(params: ClaimParams) {
  return {
    state: TRANSITIONS.claim.to,
    debounce_key: null,
    lease_token: params.leaseToken,
    lease_expires_at: params.leaseExpiresAt,
    worker: params.worker ?? null,
    updated_at: params.now,
  };
}

/** A claim's SET: `claimedValues` and attempt + 1. */
export function claimSet(params: ClaimParams): Record<string, unknown> {
  return { ...claimedValues(params), attempt: sql`attempt + 1` };
}

/** The row a claim's SET makes of `row`, read under this transaction's lock before the UPDATE. */
function claimedRow(row: JobRow, params: ClaimParams): JobRow {
  return { ...row, ...claimedValues(params), attempt: Number(row.attempt) + 1 };
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
async function claimUncapped(ctx: StoreContext, db: AnyDb, params: ClaimParams, constrained: number): Promise<JobRecord[]> {
  // Built and compiled once per queue and task set; the values that change per claim are slots.
  // A prepared statement where the engine has them: its states are literals (see guard), so a plan made
  // without the parameters' values still finds ready jobs through the partial claim index. (With the states
  // as parameters PostgreSQL's generic plan scanned and sorted every ready job: 11.8 ms against 5.7 ms to
  // claim 700 of 20,000, EXPLAIN ANALYZE with plan_cache_mode forced each way; now 5.3 ms against 5.4.)
  const keyed: KeyedPick = constrained >= params.limit ? "any" : constrained === 0 ? "none" : "some";
  const key = JSON.stringify([params.queues, params.tasks ?? null, keyed]);
  const values: Record<(typeof CLAIM_SLOTS)[number], unknown> = {
    now: params.now,
    limit: params.limit,
    constrainedLimit: constrained,
    leaseToken: params.leaseToken,
    leaseExpiresAt: params.leaseExpiresAt,
    worker: params.worker ?? null,
  };
  const build = () => uncappedStatement(ctx, ctx.db, { ...params, ...SLOTTED } as unknown as ClaimParams, keyed);
  const compiled = compiledOnce(ctx.statements, key, build, values, ctx.engine.prepare);
  const rows = (await db.executeQuery(compiled)).rows as JobRow[];
  return claimedOrder(rows.map(rowToRecord), params.constrainedLimit === undefined ? null : (j) => j.concurrencyKey !== null);
}

/** The claim parameters that change from one claim to the next: slots in the compiled claim. */
const CLAIM_SLOTS = ["now", "limit", "constrainedLimit", "leaseToken", "leaseExpiresAt", "worker"] as const;
const SLOTTED = Object.fromEntries(CLAIM_SLOTS.map((name) => [name, new Slot(name)]));
/** The columns a split claim's picks carry, to be ordered together. */
const ORDER_COLUMNS = ["id", "priority", "run_at"];

/**
 * `q` without keyed jobs. `coalesce(key, '') <= ''` is `key IS NULL` (keys are never empty) in a form PostgreSQL
 * estimates at a third of the ready jobs: from `IS NULL` it took the table's share of unkeyed rows, which keyed
 * history makes small, and then read and sorted every ready job rather than the claim index's first ones (3.6 ms
 * against 1.2 ms to claim 100 of 5,000 ready behind 100,000 keyed finished jobs, EXPLAIN ANALYZE of custom plans).
 */
// deno-lint-ignore no-explicit-any
function unkeyed<Q extends { where: (...args: any[]) => any }>(q: Q): Q {
  return q.where(sql`coalesce(${sql.ref("concurrency_key")}, '')`, "<=", "");
}

/** How many keyed jobs a one-statement claim may take: any number (up to `limit`), none, or some (`constrainedLimit`). */
type KeyedPick = "any" | "none" | "some";

/**
 * The one-statement claim: `picked` is the first `limit` claimable ready
 * jobs in claim order, locked; with `keyed` "none", of the unkeyed ones;
 * with "some", the first `limit` in claim order of two picks, each locked on
 * its own: the first `limit` unkeyed ready jobs, and the first
 * `constrainedLimit` keyed ones among the first `limit` ready jobs (a keyed
 * job behind those could not be among the first `limit` taken). The rows
 * locked but left out are not written and stay ready.
 */
function uncappedStatement(ctx: StoreContext, db: AnyDb, params: ClaimParams, keyed: KeyedPick) {
  const { tables, engine } = ctx;
  const caps = engine.capabilities;
  const queues = [...params.queues];
  const lockShared = <Q>(q: Q): Q => (caps.rowLocks ? engine.shareLock(q) : q);
  const controls = db
    .with(
      (cte) => cte("ctl_q").materialized(),
      (d) => lockShared(d.selectFrom(tables.queues).select(["name", "paused", "max_running", "rate_limit", "keyed_rate", "fair"]).where("name", "in", queues)),
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
  /** The claimable ready jobs of the claim's queues and tasks, `columns` of them, with `where` added, the first `limit` in claim order. */
  // deno-lint-ignore no-explicit-any
  const ready = (eb: any, columns: string[], limit: number, where: (q: any) => any = (q) => q) => {
    let q = guard(eb.selectFrom(tables.jobs).select(columns), "claim", { now: params.now })
      .where("queue", "in", queues)
      .where("queue", "not in", eb.selectFrom("ctl_q").select("name").where("paused", "=", 1))
      .where((w: ExpressionBuilder<any, any>) =>
        w.not(
          w.or([
            w.exists(
              w
                .selectFrom("ctl_q")
                .select("name")
                .where(controlledQueue)
                .where("paused", "=", 0),
            ),
            w.exists(w.selectFrom("ctl_t").select("name").where(countedControl)),
          ]),
        ),
      );
    if (params.tasks !== undefined) q = q.where("task", "in", [...params.tasks]);
    return inClaimOrder(where(q)).limit(limit);
  };
  if (keyed !== "some") {
    const pick = (eb: unknown) => lock(ready(eb, ["id"], params.limit, keyed === "none" ? unkeyed : undefined));
    return finishClaim(ctx, controls.with((cte) => cte("picked").materialized(), pick), params);
  }
  const picking = controls
    .with((cte) => cte("unkeyed").materialized(), (eb) => lock(ready(eb, ORDER_COLUMNS, params.limit, unkeyed)))
    // The keyed jobs are chosen among the first `limit` ready ones, read unlocked (a bounded read of the claim
    // index, however many unkeyed jobs come first), then locked by id with the guard checked again; one another
    // claim holds is passed over.
    .with(
      (cte) => cte("keyed").materialized(),
      (eb) => {
        const window = ready(eb, [...ORDER_COLUMNS, "concurrency_key"], params.limit).as("w");
        const chosen = inClaimOrder(eb.selectFrom(window).select("w.id").where("w.concurrency_key", "is not", null)).limit(params.constrainedLimit!);
        const byId = caps.arrays ? sql<boolean>`${sql.ref("id")} = any(array(${chosen}))` : (w: ExpressionBuilder<any, any>) => w("id", "in", chosen);
        return lock(guard(eb.selectFrom(tables.jobs).select(ORDER_COLUMNS).where(byId), "claim", { now: params.now }));
      },
    )
    .with(
      (cte) => cte("picked").materialized(),
      // deno-lint-ignore no-explicit-any
      (eb: any) => {
        const both = eb.selectFrom("unkeyed").select(ORDER_COLUMNS).unionAll(eb.selectFrom("keyed").select(ORDER_COLUMNS));
        return inClaimOrder(eb.selectFrom(both.as("both")).select("id")).limit(params.limit);
      },
    );
  return finishClaim(ctx, picking, params);
}

/** The UPDATE of a claim's `picked` jobs (a CTE of ids): running under the claim's lease, returning the rows. */
// deno-lint-ignore no-explicit-any
function finishClaim(ctx: StoreContext, picking: any, params: ClaimParams) {
  const { tables, engine } = ctx;
  const caps = engine.capabilities;
  const query = picking.updateTable(tables.jobs).set(claimSet(params));
  // A materialized CTE runs once: a LIMIT subquery inside IN may be re-run per row and claim more than `limit`.
  // Where the engine has arrays, `id = ANY(ARRAY(SELECT id FROM picked))`: the ids are computed once and the
  // update goes by primary key alone. The guard is in the picks, whose FOR UPDATE re-checks it on the newest
  // version of each row it locks, and nothing can change a row this statement holds before it updates it.
  // (With the guard repeated here, or with `IN` or a join, PostgreSQL with stale statistics, e.g. a burst of
  // jobs behind a million finished ones, walked every ready job per claim: 0.7 s per claim of 500 behind 10,000.)
  const claimed = caps.arrays
    ? query.where(sql<boolean>`${sql.ref("id")} = any(array(select ${sql.ref("picked.id")} from ${sql.table("picked")}))`).returningAll()
    : guard(query.where("id", "in", (eb: ExpressionBuilder<any, any>) => eb.selectFrom("picked").select("id")), "claim", { now: params.now }).returningAll();
  return labelled(claimed, "claim");
}

/**
 * A claim when some control may apply: in one transaction, the control
 * rows of the claim's capped queues are locked exclusively (their room is
 * counted), the others shared; candidates are picked by the greedy cap
 * rule, taking at most `constrained` keyed jobs and jobs of capped queues
 * and tasks; capped tasks' rows are locked exclusively as candidates reach
 * them. With `constrained` 0, capped queues and tasks are left alone: every
 * control row is read shared and no room is counted.
 */
async function claimWithControls(ctx: StoreContext, memory: ClaimMemory, params: ClaimParams, constrained: number): Promise<JobRecord[]> {
  // No cap met lately: expect none, and lock every queue's control row shared in one read; a cap found
  // there (set since) rolls this transaction back and the claim runs again with the capped rows locked exclusively.
  const expectNoCaps = params.now - memory.capsSeenAt >= CAPS_MEMORY_MS;
  try {
    return await claimUnderControls(ctx, memory, params, constrained, expectNoCaps);
  } catch (error) {
    if (error !== CAPS_FOUND) throw error;
    memory.capsSeenAt = params.now;
    return claimUnderControls(ctx, memory, params, constrained, false);
  }
}

/** The columns a candidate read adds: its task's cap and rate limit. */
const TASK_CAP = "docket_task_cap";
const TASK_RATE = "docket_task_rate";

/** Whether a queue or task row has a control that a claim counts under its exclusive lock: a cap or a rate limit. */
const counted = (r: { max_running: unknown; rate_limit?: unknown }): boolean => r.max_running !== null || (r.rate_limit ?? null) !== null;

/** A rate limit a claim holds locked, where its room is kept, and its room when locked. */
interface LimitInRoom {
  held: HeldLimit;
  map: Map<string, number>;
  initial: number;
}

/** Thrown inside a claim that expected no caps and found one: its transaction rolls back. */
const CAPS_FOUND = new Error("a queue cap was found by a claim that expected none");

function claimUnderControls(ctx: StoreContext, memory: ClaimMemory, params: ClaimParams, constrained: number, expectNoCaps: boolean): Promise<JobRecord[]> {
  const { tables, engine } = ctx;
  return engine.writeTransaction(ctx.db, async (db) => {
    const queueRows = await lockQueueControls(ctx, db, params.queues, constrained === 0 ? "shared" : expectNoCaps ? "expectNoCaps" : "lockCapped");
    const paused = new Set(queueRows.filter((r) => Number(r.paused) === 1).map((r) => r.name));
    const capped = queueRows.filter((r) => counted(r) && !paused.has(r.name));
    if (capped.length > 0 || queueRows.some((r) => Number(r.keyed_rate ?? 0) === 1)) memory.capsSeenAt = params.now;
    const fairQueues = new Set(queueRows.filter((r) => Number(r.fair ?? 0) === 1 && !paused.has(r.name)).map((r) => r.name));
    if (fairQueues.size > 0) memory.capsSeenAt = params.now;
    const uncapped = params.queues.filter((q) => !paused.has(q) && !capped.some((r) => r.name === q) && !fairQueues.has(q));
    const fairUncapped = [...fairQueues].filter((q) => !capped.some((r) => r.name === q));
    /** The fair queues this claim serves, with the keys it holds. */
    const fair = new Map<string, FairClaim>();
    const rates = rateRoomOf();
    const room: ClaimRoom = { queues: new Map(), tasks: new Map(), constrained, rates };
    const limits: LimitInRoom[] = [];
    const hold = (held: HeldLimit | null, map: Map<string, number>) => {
      if (held === null) return;
      const initial = roomOf(held, params.now);
      map.set(held.name, initial);
      limits.push({ held, map, initial });
    };
    // Counted apart from the candidate read, which then locks only as many of the queue's jobs as it may take.
    if (constrained > 0) {
      for (const r of capped) {
        if (r.max_running !== null) room.queues.set(r.name, Number(r.max_running) - (await countRunning(ctx, db, "queue", r.name)));
        hold(heldLimit(tables.queues, r), rates.queues);
      }
    }
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
    for (;;) {
      const need = params.limit - chosen.length;
      const spent = room.constrained <= 0;
      if (spent) for (const task of [...room.tasks.keys(), ...rates.tasks.keys()]) exhausted.add(task);
      const groups: { queues: string[]; limit: number }[] = [];
      if (uncapped.length > 0) groups.push({ queues: uncapped, limit: need });
      for (const name of fairUncapped) groups.push({ queues: [name], limit: need });
      if (!spent) {
        for (const { name } of capped) {
          const left = Math.min(room.queues.get(name) ?? Infinity, rates.queues.get(name) ?? Infinity);
          if (left > 0) groups.push({ queues: [name], limit: Math.min(left, need, room.constrained) });
        }
      }
      if (need <= 0 || groups.length === 0) break;
      const plain: ClaimCandidate[] = [];
      const served: ClaimCandidate[][] = [];
      const newKeys = new Set<string>();
      /** A candidate row read: its controls noted, the candidate made. */
      const seen = (row: Record<string, any>): ClaimCandidate => {
        const { [TASK_CAP]: taskCap, [TASK_RATE]: taskRate, ...r } = row;
        const rateKey = r.rate_key ?? null;
        if ((taskCap ?? null) !== null || (taskRate ?? null) !== null) cappedTasks.add(r.task);
        if (rateKey !== null && !spent && !rates.keys.has(rateKey)) newKeys.add(rateKey);
        if (readWhole) whole.set(Number(r.id), r as JobRow);
        return { id: Number(r.id), task: r.task, queue: r.queue, priority: Number(r.priority), runAt: Number(r.run_at), concurrencyKey: r.concurrency_key ?? null, rateKey, fairKey: r.fair_key ?? null };
      };
      /** The claimable ready jobs of `queues`, filtered as this pass filters them, in claim order. */
      const candidateQuery = (queues: string[]) => {
        const from = db.selectFrom(tables.jobs);
        // deno-lint-ignore no-explicit-any
        let columns: SelectQueryBuilder<any, any, any> = readWhole ? from.selectAll() : from.select(["id", "task", "queue", "priority", "run_at", "concurrency_key", "rate_key", "fair_key"]);
        // Read with the candidates, unlocked: their tasks' caps and rate limits (such a task is then locked and counted by `taskRoom`).
        const taskColumn = (column: string, as: string) => (eb: ExpressionBuilder<any, any>) => eb.selectFrom(tables.tasks).select(column).where("name", "=", sql.ref(`${tables.jobs}.task`)).as(as);
        columns = columns.select(taskColumn("max_running", TASK_CAP)).select(taskColumn("rate_limit", TASK_RATE));
        let q = guard(columns, "claim", { now: params.now }).where("queue", "in", queues);
        if (spent) q = unkeyed(q).where("rate_key", "is", null);
        else if (rates.spentKeys.size > 0) q = q.where((eb) => eb.or([eb("rate_key", "is", null), eb("rate_key", "not in", [...rates.spentKeys])]));
        if (chosen.length > 0) q = q.where("id", "not in", chosen);
        if (params.tasks !== undefined) q = q.where("task", "in", [...params.tasks]);
        if (exhausted.size > 0) q = q.where("task", "not in", [...exhausted]);
        return inClaimOrder(q);
      };
      for (const g of groups) {
        const queue = g.queues[0]!;
        if (g.queues.length === 1 && fairQueues.has(queue)) {
          const filtered = spent || rates.spentKeys.size > 0 || chosen.length > 0 || exhausted.size > 0;
          served.push(await fairPick(ctx, db, fair, queue, g.limit, params.limit, chosen, filtered, candidateQuery, seen));
          continue;
        }
        let q = candidateQuery(g.queues).limit(g.limit);
        if (engine.capabilities.skipLocked) q = q.forUpdate().skipLocked();
        for (const r of await labelled(q, "claim-candidates").execute()) plain.push(seen(r));
      }
      // Fair queues' candidates in their round-robin order, merged with the others' (claim order) by their heads.
      const candidates = mergeByHeads([plain.sort(byClaimOrder), ...served]);
      if (candidates.length === 0) break;
      const unseen = [...new Set(candidates.map((c) => c.task))].filter((t) => !checkedTasks.has(t) && cappedTasks.has(t));
      const tasksRoom = await taskRoom(ctx, db, unseen, !spent);
      for (const [task, left] of tasksRoom.caps) room.tasks.set(task, left);
      for (const [task, held] of tasksRoom.limits) {
        if (held === null) rates.tasks.set(task, 0);
        else hold(held, rates.tasks);
      }
      if (tasksRoom.caps.size + tasksRoom.limits.size > 0) memory.capsSeenAt = params.now;
      for (const t of unseen) checkedTasks.add(t);
      for (const held of await lockRateKeys(ctx, db, [...newKeys].sort())) hold(held, rates.keys);
      const passedOver = takeWithinCaps(candidates, params.limit, room, chosen, exhausted);
      if (!passedOver) break;
    }
    for (const [queue, f] of fair) await f.finish(ctx, db, queue, chosen);
    await logStarts(ctx, db, limits, params);
    if (chosen.length === 0) return [];
    const update = labelled(guard(db.updateTable(tables.jobs).set(claimSet(params)).where("id", "in", chosen), "claim", { now: params.now }), "claim");
    let rows: JobRow[];
    if (engine.capabilities.returning) {
      rows = (await update.returningAll().execute()) as JobRow[];
    } else {
      const updated = Number((await update.executeTakeFirst()).numUpdatedRows);
      // The chosen rows are locked by this transaction since they were read: the UPDATE moved each of them as read.
      rows =
        readWhole && updated === chosen.length
          ? chosen.map((id) => claimedRow(whole.get(id)!, params))
          : ((await db.selectFrom(tables.jobs).selectAll().where("id", "in", chosen).where("lease_token", "=", params.leaseToken).execute()) as JobRow[]);
    }
    return claimedOrder(rows.map(rowToRecord), params.constrainedLimit === undefined ? null : (j) => isConstrained(j, room));
  });
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
 */
async function lockQueueControls(ctx: StoreContext, db: AnyDb, queues: readonly string[], mode: "lockCapped" | "expectNoCaps" | "shared"): Promise<QueueRow[]> {
  const read = () =>
    db
      .selectFrom(ctx.tables.queues)
      .select(["name", "paused", "max_running", "keyed_rate", "fair", ...RATE_COLUMNS])
      .where("name", "in", [...queues])
      .orderBy("name");
  if (!ctx.engine.capabilities.rowLocks) return (await read().execute()) as QueueRow[];
  if (mode !== "lockCapped") {
    const rows = (await ctx.engine.shareLock(read()).execute()) as QueueRow[];
    if (mode === "expectNoCaps" && rows.some((r) => counted(r) && Number(r.paused) !== 1)) throw CAPS_FOUND;
    return rows;
  }
  const capped = (await read()
    .where(countedControl)
    .forUpdate()
    .execute()) as QueueRow[];
  const cappedNames = new Set(capped.map((r) => r.name));
  if (queues.every((q) => cappedNames.has(q))) return capped;
  const others = (await ctx.engine.shareLock(read()).execute()) as QueueRow[];
  const rest = others.filter((r) => !cappedNames.has(r.name)).map((r) => (counted(r) ? { ...r, paused: 1 } : r));
  return [...capped, ...rest];
}

/**
 * Remaining room per capped task among `tasks` (`caps`), and the rate
 * limits among them (`limits`), with the task control rows locked in name
 * order; without `count` (a claim that takes no job of a capped or
 * rate-limited task), room 0 for each cap and a null limit (no room) for
 * each rate limit, read without locks or counts.
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
  if (count && ctx.engine.capabilities.rowLocks) q = q.forUpdate();
  for (const r of (await q.execute()) as TaskRow[]) {
    if (r.max_running !== null) caps.set(r.name, count ? Number(r.max_running) - (await countRunning(ctx, db, "task", r.name)) : 0);
    const held = heldLimit(ctx.tables.tasks, r);
    if (held !== null) limits.set(r.name, count ? held : null);
  }
  return { caps, limits };
}

/**
 * Logs the starts this claim took of each limit it holds, and tells the
 * caller (`onRateLimited`) when the earliest of the limits it used up has
 * room again.
 */
async function logStarts(ctx: StoreContext, db: AnyDb, limits: readonly LimitInRoom[], params: ClaimParams): Promise<void> {
  let heldUntil = Number.POSITIVE_INFINITY;
  for (const { held, map, initial } of limits) {
    const left = map.get(held.name)!;
    if (initial - left > 0) await logTaken(ctx, db, held, params.now, initial - left);
    if (left <= 0) heldUntil = Math.min(heldUntil, roomAt(held, params.now));
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
