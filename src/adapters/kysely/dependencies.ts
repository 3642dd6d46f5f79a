/**
 * Dependencies on SQL (EnqueueOptions.after, I15): storing a batch's edges
 * under its stored parents' row locks, and settling a parent's children in
 * the transaction of the write that ends it.
 *
 * The guard of R23 (two parents end at once, each must count): a parent's
 * success reads its children's `waiting_on` under their row locks (in id
 * order; on SQLite under the single writer's lock) and writes the dropped
 * counts from that read, in the same transaction; a child at 0 moves to
 * scheduled in that write.
 *
 * Why the edges a parent's settle reads are complete: an enqueue that names
 * a stored parent locks its row first and marks it `has_children`; a write
 * that ends a job without settling children requires `has_children = 0`
 * (`childless`), so it misses a parent marked before its row lock was
 * granted and the caller takes the path that settles (`transition`), whose
 * later statements see the enqueue's edges.
 */
import { sql } from "kysely";
import type { EnqueueParams, EnqueuedRecord, NewJob, ReleasedChild } from "../../core/adapter.ts";
import { cascadeReason, endedParentMessage } from "../../core/dependencies.ts";
import { InvalidArgumentError, NotFoundError } from "../../core/errors.ts";
import { TERMINAL_STATES, type JobState } from "../../core/states.ts";
import { TRANSITIONS } from "../../core/transitions.ts";
import type { AnyDb } from "./engine.ts";
import { BATCH_ROWS, type StoreContext } from "./context.ts";
import { writeGuards } from "./guard-writes.ts";
import { labelled } from "./labels.ts";

/** A job a write just ended (or found ended), as `settleChildren` needs it. */
export interface Ended {
  id: number;
  state: JobState;
}

/** Adds `has_children = 0`: the write matches no job whose children it would have to settle. */
// deno-lint-ignore no-explicit-any
export function childless<Q extends { where: (...args: any[]) => any }>(query: Q): Q {
  return query.where("has_children", "=", sql.lit(0));
}

/**
 * Locks the stored parents `ids` (FOR UPDATE where the engine has row
 * locks) and returns each one's state. A parent that does not exist is
 * NotFoundError (first: whatever the others' states); one dead or cancelled
 * InvalidArgumentError.
 */
export async function lockParents(ctx: StoreContext, db: AnyDb, ids: readonly number[]): Promise<Map<number, JobState>> {
  const states = await lockedStates(ctx, db, ids);
  const missing = ids.find((id) => !states.has(id));
  if (missing !== undefined) throw new NotFoundError(missing, `after: parent job ${missing} not found`);
  const ended = ids.find((id) => states.get(id) === "dead" || states.get(id) === "cancelled");
  if (ended !== undefined) throw new InvalidArgumentError(endedParentMessage(ended, states.get(ended)!));
  return states;
}

/**
 * The jobs of `params` as they are stored when they have parents: waiting
 * when any stored parent (`states`) has not succeeded or any batch parent
 * is named (a batch parent is new, or a job an idempotency or debounce key
 * stands for, which `wireBatch` settles afterwards).
 */
export function waitingJobs(jobs: readonly NewJob[], states: ReadonlyMap<number, JobState>): NewJob[] {
  return jobs.map((job) => (waitCount(job, states) > 0 ? ({ ...job, state: "waiting" } as unknown as NewJob) : job));
}

/**
 * `values` (the rows of `jobs`, as `rowsOf` made them: fresh objects, set in
 * place) with each row's count of parents to wait for and its mark as a
 * parent of another job of the batch, so that the insert writes them
 * (`wireBatch` stores the edges).
 */
export function withDependencyColumns(jobs: readonly NewJob[], values: Record<string, unknown>[], states: ReadonlyMap<number, JobState>): Record<string, unknown>[] {
  const refParents = new Set(jobs.flatMap((j) => j.after?.refs ?? []));
  // The rows are the caller's fresh objects (`rowsOf`): set in place (a spread copy of each cost more than the edges' insert per row).
  values.forEach((row, i) => {
    row.waiting_on = waitCount(jobs[i]!, states);
    row.has_children = refParents.has(i) ? 1 : 0;
  });
  return values;
}

function waitCount(job: NewJob, states: ReadonlyMap<number, JobState>): number {
  if (!job.after) return 0;
  return job.after.ids.filter((id) => states.get(id) !== "succeeded").length + job.after.refs.length;
}

/**
 * After the batch's rows are inserted (`records`, in input order, with
 * their counts and marks written by the insert, see
 * `withDependencyColumns`): stores each created child's edges, marks the
 * live stored parents `has_children`, then settles the new children of batch
 * parents that turned out already ended (a discarded keyed job, or a
 * finished job an idempotency or debounce key stood for), as their end
 * demands; a batch parent that is such a stored job is marked too.
 * Returns whether it settled any (then some of `records` are no longer
 * the rows as stored).
 */
export async function wireBatch(ctx: StoreContext, db: AnyDb, params: EnqueueParams, states: ReadonlyMap<number, JobState>, records: readonly EnqueuedRecord[]): Promise<boolean> {
  const children: number[] = [];
  const parents: number[] = [];
  const refParents = new Set<number>();
  params.jobs.forEach((job, i) => {
    const child = records[i]!;
    if (!job.after || !child.created) return;
    for (const id of job.after.ids) {
      children.push(child.id);
      parents.push(id);
    }
    for (const r of job.after.refs) {
      children.push(child.id);
      parents.push(records[r]!.id);
      refParents.add(records[r]!.id);
    }
  });
  await insertEdges(ctx, db, children, parents);
  const fresh = new Set(children);
  const reused = records.filter((r) => !r.created && refParents.has(r.id)).map((r) => r.id);
  const live = [...[...states].filter(([, s]) => s !== "succeeded").map(([id]) => id), ...reused];
  await markParents(ctx, db, live);
  const ended =
    reused.length === 0
      ? records.filter((r) => r.created && refParents.has(r.id) && TERMINAL_STATES.includes(r.state))
      : [...(await lockedStates(ctx, db, [...refParents]))].filter(([, s]) => TERMINAL_STATES.includes(s)).map(([id, state]) => ({ id, state }));
  if (ended.length === 0) return false;
  await settleChildren(ctx, db, ended, params.now, fresh);
  return true;
}

/** Edges per INSERT without array parameters: two parameters each, within SQLite's 32,766 and MySQL's 65,535 per statement. */
const EDGE_ROWS = 5000;

/** Inserts the edges (children[k], parents[k]): ONE statement with array parameters where the engine has them, else one per EDGE_ROWS edges. */
async function insertEdges(ctx: StoreContext, db: AnyDb, children: readonly number[], parents: readonly number[]): Promise<void> {
  if (children.length === 0) return;
  const { tables, engine } = ctx;
  if (engine.capabilities.arrays) {
    // Each id list travels as one array literal built here (the driver would quote every element on its own).
    const rows = sql`select * from unnest(${`{${children.join(",")}}`}::bigint[], ${`{${parents.join(",")}}`}::bigint[])`;
    await labelled(db.insertInto(tables.deps).columns(["child_id", "parent_id"]).expression(rows), "enqueue-deps").execute();
    return;
  }
  for (let i = 0; i < children.length; i += EDGE_ROWS) {
    const edges = children.slice(i, i + EDGE_ROWS).map((child, k) => ({ child_id: child, parent_id: parents[i + k]! }));
    await labelled(db.insertInto(tables.deps).values(edges), "enqueue-deps").execute();
  }
}

/** Marks jobs `ids` as having children (`has_children = 1`). */
async function markParents(ctx: StoreContext, db: AnyDb, ids: readonly number[]): Promise<void> {
  const unique = [...new Set(ids)];
  for (let i = 0; i < unique.length; i += BATCH_ROWS) {
    await labelled(db.updateTable(ctx.tables.jobs).set({ has_children: 1 }).where("id", "in", unique.slice(i, i + BATCH_ROWS)), "enqueue-deps").execute();
  }
}

/** The states of jobs `ids`, locked (FOR UPDATE, in id order) where the engine has row locks; missing ones are left out. */
async function lockedStates(ctx: StoreContext, db: AnyDb, ids: readonly number[]): Promise<Map<number, JobState>> {
  const states = new Map<number, JobState>();
  for (let i = 0; i < ids.length; i += BATCH_ROWS) {
    let q = db.selectFrom(ctx.tables.jobs).select(["id", "state"]).where("id", "in", ids.slice(i, i + BATCH_ROWS)).orderBy("id");
    if (ctx.engine.capabilities.rowLocks) q = q.forUpdate();
    for (const r of (await labelled(q, "lock-parents").execute()) as { id: number | string; state: JobState }[]) states.set(Number(r.id), r.state);
  }
  await writeGuards(ctx, db, ctx.tables.jobs, "id", [...states.keys()]);
  return states;
}

/**
 * Settles the children of jobs a write just ended, in the caller's
 * transaction (`only`: just these children). Children of a succeeded job:
 * each waiting child's `waiting_on` drops by the number of its parents among
 * them, and a child at 0 moves to scheduled (TRANSITIONS.unwait), announced
 * as due: one statement per batch of parents (`releaseInOne` with RETURNING;
 * per BATCH_ROWS parents without array parameters; `releaseJoined` on
 * MariaDB, which reports an unknown queue). Children of a dead or cancelled job: every waiting
 * descendant is cancelled, the reason naming the job, a generation per
 * statement pair.
 */
export async function settleChildren(ctx: StoreContext, db: AnyDb, ended: readonly Ended[], now: number, only?: ReadonlySet<number>): Promise<ReleasedChild[]> {
  const succeeded = ended.filter((e) => e.state === "succeeded").map((e) => e.id);
  const released = succeeded.length > 0 ? await release(ctx, db, succeeded, now, only) : [];
  for (const e of ended) if (e.state === "dead" || e.state === "cancelled") await cascade(ctx, db, e, now, only);
  return released;
}

/** The children of `parents` (only those in `only`, when given): one row per edge. */
async function edgesOf(ctx: StoreContext, db: AnyDb, parents: readonly number[], only?: ReadonlySet<number>): Promise<{ child: number; parent: number }[]> {
  const edges: { child: number; parent: number }[] = [];
  for (let i = 0; i < parents.length; i += BATCH_ROWS) {
    const q = db.selectFrom(ctx.tables.deps).select(["child_id", "parent_id"]).where("parent_id", "in", parents.slice(i, i + BATCH_ROWS));
    for (const r of (await labelled(q, "settle-children").execute()) as { child_id: number | string; parent_id: number | string }[]) {
      const child = Number(r.child_id);
      if (!only || only.has(child)) edges.push({ child, parent: Number(r.parent_id) });
    }
  }
  return edges;
}

async function release(ctx: StoreContext, db: AnyDb, parents: readonly number[], now: number, only?: ReadonlySet<number>): Promise<ReleasedChild[]> {
  const out = ctx.engine.capabilities.returning ? await releaseInOne(ctx, db, parents, now, only) : await releaseJoined(ctx, db, parents, now, only);
  const queues = [...new Set(out.flatMap((r) => (r.queue === null ? [] : [r.queue])))];
  if (queues.length > 0) await ctx.engine.announceReady(db, queues.map((queue) => ({ queue, due: true })));
  return out;
}

/**
 * Engines with `UPDATE … FROM … RETURNING`: ONE statement per batch of
 * parents (one in all with array parameters): a CTE counts each child's
 * edges from `parents`, another reads the waiting children's counts under
 * their row locks in id order (FOR UPDATE OF the jobs, where the engine has
 * row locks; a locking read returns the newest committed count), and the
 * UPDATE writes the dropped counts from that read, `scheduled` at 0.
 */
async function releaseInOne(ctx: StoreContext, db: AnyDb, parents: readonly number[], now: number, only?: ReadonlySet<number>): Promise<ReleasedChild[]> {
  const { tables, engine } = ctx;
  const out: ReleasedChild[] = [];
  const chunks = engine.capabilities.arrays ? [parents] : Array.from({ length: Math.ceil(parents.length / BATCH_ROWS) }, (_, i) => parents.slice(i * BATCH_ROWS, (i + 1) * BATCH_ROWS));
  const onlyIds = only ? [...only] : null;
  for (const chunk of chunks) {
    let counts = db
      .selectFrom(tables.deps)
      .select(["child_id", sql<number>`count(*)`.as("n")])
      .where("parent_id", "in", engine.capabilities.arrays ? sql`(select unnest(${[...chunk]}::bigint[]))` : [...chunk])
      .groupBy("child_id");
    if (onlyIds) counts = counts.where("child_id", "in", onlyIds);
    // The guard of R23: the counts are read under the children's row locks (taken in id order), and written from that read.
    let seen = db
      .selectFrom(`${tables.jobs} as j`)
      .innerJoin("counts", "counts.child_id", "j.id")
      .select(["j.id", "j.waiting_on", "counts.n"])
      .where("j.state", "=", sql.lit("waiting"))
      .orderBy("j.id");
    if (engine.capabilities.rowLocks) seen = seen.forUpdate(["j"]);
    const left = sql`${sql.ref("seen.waiting_on")} - ${sql.ref("seen.n")}`;
    const q = db
      .with("counts", () => counts)
      .with("seen", () => seen)
      .updateTable(tables.jobs)
      .from("seen")
      .set({
        waiting_on: sql`case when ${left} > 0 then ${left} else 0 end`,
        state: sql`case when ${left} > 0 then ${sql.lit("waiting")} else ${sql.lit(TRANSITIONS.unwait.to)} end`,
        updated_at: now,
      })
      .whereRef(`${tables.jobs}.id`, "=", "seen.id")
      .where(`${tables.jobs}.state`, "=", sql.lit("waiting"))
      .returning([`${tables.jobs}.state`, `${tables.jobs}.queue`, `${tables.jobs}.run_at`]);
    for (const r of (await labelled(q, "unwait").execute()) as { state: string; queue: string; run_at: number | string }[]) {
      if (r.state !== "waiting") out.push({ queue: r.queue, runAt: Number(r.run_at) });
    }
  }
  return out;
}

/**
 * Engines without RETURNING on UPDATE (MariaDB): ONE multi-table `UPDATE
 * jobs AS j, (<each child's edge count from parents>) AS c … WHERE c.child_id
 * = j.id AND j.state = 'waiting'` per BATCH_ROWS parents. The guard of R23:
 * InnoDB's UPDATE reads each child it writes under the child's row lock,
 * newest committed version (a concurrent parent's success waits for it,
 * then counts from what it wrote), and every assignment reads the row as it
 * was before the statement. It cannot say which children reached 0: when it
 * changed any, it reports one released child of unknown queue, due now
 * (ReleasedChild.queue null), so the caller stages at once (a child still
 * waiting makes that a read that admits nothing).
 */
async function releaseJoined(ctx: StoreContext, db: AnyDb, parents: readonly number[], now: number, only?: ReadonlySet<number>): Promise<ReleasedChild[]> {
  const onlyIds = only ? [...only] : null;
  let changed = false;
  for (let i = 0; i < parents.length; i += BATCH_ROWS) {
    let counts = db
      .selectFrom(ctx.tables.deps)
      .select(["child_id", sql<number>`count(*)`.as("n")])
      .where("parent_id", "in", parents.slice(i, i + BATCH_ROWS))
      .groupBy("child_id");
    if (onlyIds) counts = counts.where("child_id", "in", onlyIds);
    const left = sql`${sql.ref("j.waiting_on")} - ${sql.ref("c.n")}`;
    // A multi-table UPDATE (kysely's `updateTable` with a list), its join condition in the WHERE clause.
    // deno-lint-ignore no-explicit-any
    const q = (db as any)
      .updateTable([`${ctx.tables.jobs} as j`, counts.as("c")])
      .set("j.state", sql`case when ${left} > 0 then ${sql.lit("waiting")} else ${sql.lit(TRANSITIONS.unwait.to)} end`)
      .set("j.waiting_on", sql`case when ${left} > 0 then ${left} else 0 end`)
      .set("j.updated_at", now)
      .whereRef("c.child_id", "=", "j.id")
      .where("j.state", "=", sql.lit("waiting"));
    const result = (await labelled(q, "unwait").executeTakeFirst()) as { numUpdatedRows?: bigint } | undefined;
    if (Number(result?.numUpdatedRows ?? 0) > 0) changed = true;
  }
  return changed ? [{ queue: null, runAt: now }] : [];
}

async function cascade(ctx: StoreContext, db: AnyDb, root: Ended, now: number, only?: ReadonlySet<number>): Promise<void> {
  let front = [root.id];
  let first = true;
  while (front.length > 0) {
    const children = [...new Set((await edgesOf(ctx, db, front, first ? only : undefined)).map((e) => e.child))].sort((a, b) => a - b);
    first = false;
    const next: number[] = [];
    for (let i = 0; i < children.length; i += BATCH_ROWS) {
      const ids = children.slice(i, i + BATCH_ROWS);
      let pick = db.selectFrom(ctx.tables.jobs).select("id").where("id", "in", ids).where("state", "=", sql.lit("waiting"));
      if (ctx.engine.capabilities.rowLocks) pick = pick.forUpdate();
      const waiting = ((await pick.execute()) as { id: number | string }[]).map((r) => Number(r.id));
      if (waiting.length === 0) continue;
      const set = { state: TRANSITIONS.cancel.to, finished_at: now, updated_at: now, waiting_on: 0, last_error: cascadeReason(root.id, root.state) };
      await labelled(db.updateTable(ctx.tables.jobs).set(set).where("id", "in", waiting).where("state", "=", sql.lit("waiting")), "cancel-children").execute();
      next.push(...waiting);
    }
    front = next;
  }
}

/** The parents and children of job `id`, by id. */
export async function dependenciesOf(ctx: StoreContext, id: number): Promise<{ parents: number[]; children: number[] }> {
  const { db, tables } = ctx;
  const parents = (await db.selectFrom(tables.deps).select("parent_id").where("child_id", "=", id).orderBy("parent_id").execute()) as { parent_id: number | string }[];
  const children = (await db.selectFrom(tables.deps).select("child_id").where("parent_id", "=", id).orderBy("child_id").execute()) as { child_id: number | string }[];
  return { parents: parents.map((r) => Number(r.parent_id)), children: children.map((r) => Number(r.child_id)) };
}

/** Deletes the edges of purged jobs `ids` (as child or as parent), in the purge's unit of work. */
export async function deleteEdges(ctx: StoreContext, db: AnyDb, ids: readonly number[]): Promise<void> {
  for (let i = 0; i < ids.length; i += BATCH_ROWS) {
    const chunk = ids.slice(i, i + BATCH_ROWS);
    await db.deleteFrom(ctx.tables.deps).where((eb) => eb.or([eb("child_id", "in", chunk), eb("parent_id", "in", chunk)])).execute();
  }
}
