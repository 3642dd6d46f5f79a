import { sql } from "kysely";
import type { FailParams, SettleItem, SettleParams, SettledJob } from "../../core/adapter.ts";
import { TRANSITIONS, endsJob, freesSlot, type TransitionEvent } from "../../core/transitions.ts";
import { ERROR_HISTORY } from "../../core/job.ts";
import type { AnyDb, Engine } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { guardMany, guardOneToken } from "./guard.ts";
import { compiledOnce, PLANNED_EACH_RUN, Slot } from "./compiled.ts";
import { transition } from "./guarded-write.ts";
import { SETTLED_COLUMNS, rowToSettled, type SettledRow } from "./row.ts";
import { labelled } from "./labels.ts";
import { lockKeys, promote } from "./promotion.ts";
import { childless, settleChildren } from "./dependencies.ts";

export const CLEAR_LEASE = { lease_token: null, lease_expires_at: null } as const;

/** A write: the transition and the columns (besides state and updated_at) it sets. */
export interface Write {
  event: TransitionEvent;
  set: Record<string, unknown>;
}

/** What a lease holder's outcome writes. */
export function outcomeWrite(engine: Engine, item: SettleItem): Write {
  if (item.kind === "complete") return { event: "complete", set: { ...CLEAR_LEASE, finished_at: item.now, result: item.result ?? null } };
  if (item.kind === "release") return { event: "release", set: { ...CLEAR_LEASE, attempt: sql`attempt - 1` } };
  return failureWrite(engine, item, "retry", "bury");
}

/**
 * A failed attempt's write, by its holder (retry/bury) or by a sweeper
 * (expireRetry/expireBury): retried at `retryAt`, or dead; the error is
 * appended to the job's history (ERROR_HISTORY).
 */
export function failureWrite(engine: Engine, params: FailParams, retry: TransitionEvent, bury: TransitionEvent): Write {
  const entry = { at: params.now, error: params.error.slice(0, ERROR_HISTORY.chars) };
  const error = { ...CLEAR_LEASE, last_error: params.error, errors: engine.appendAttemptError(entry, ERROR_HISTORY.entries) };
  return params.retryAt === null ? { event: bury, set: { ...error, finished_at: params.now } } : { event: retry, set: { ...error, run_at: params.retryAt } };
}

/**
 * See DocketAdapter.settle. Jobs the caller knows to be unkeyed: one guarded
 * statement per distinct write, all in one unit of work. Jobs the caller
 * knows to be keyed: one transaction that locks their keys (in name order),
 * applies one guarded statement per distinct write, and promotes the keys
 * whose slots freed (see `promote`): a bounded number of statements however
 * many jobs and keys. Jobs named twice (a stale attempt beside a fresh one:
 * results are matched by id), jobs of unknown key, and misses (a lost race,
 * a key other than the caller said, or a job with children to settle): one
 * transition each, with the key's promotion and the children's settling.
 */
export async function settle(ctx: StoreContext, params: SettleParams): Promise<(SettledJob | null)[]> {
  const { items } = params;
  const results: (SettledJob | null)[] = items.map(() => null);
  const seen = new Map<number, number>();
  for (const item of items) seen.set(item.id, (seen.get(item.id) ?? 0) + 1);
  const unkeyed = groupItems(ctx, items, (item) => item.concurrencyKey === null && seen.get(item.id) === 1);
  if (unkeyed.size > 0) {
    const list = [...unkeyed.values()];
    const run = (db: AnyDb) => settleGroups(ctx, db, list, null);
    const rows = await (list.length === 1 ? ctx.engine.writeStatement(ctx.db, run) : ctx.engine.writeTransaction(ctx.db, run));
    for (const group of list) group.items.forEach((item, k) => (results[group.indexes[k]!] = rows.get(item.id) ?? null));
  }
  const keyed = groupItems(ctx, items, (item) => typeof item.concurrencyKey === "string" && seen.get(item.id) === 1);
  if (keyed.size > 0) {
    const list = [...keyed.values()];
    const rows = await ctx.engine.writeTransaction(ctx.db, (db) => settleKeyed(ctx, db, list));
    for (const group of list) group.items.forEach((item, k) => (results[group.indexes[k]!] = rows.get(item.id) ?? null));
  }
  // Unkeyed jobs the fast statements passed over, most often parents: one transaction that writes them and settles their children.
  const missed = groupItems(ctx, items, (item, index) => results[index] === null && item.concurrencyKey === null && item.kind !== "release" && seen.get(item.id) === 1);
  if (missed.size > 1 || [...missed.values()].some((g) => g.items.length > 1)) {
    const list = [...missed.values()];
    const rows = await ctx.engine.writeTransaction(ctx.db, (db) => settleGroups(ctx, db, list, null, undefined, true));
    for (const group of list) group.items.forEach((item, k) => (results[group.indexes[k]!] = rows.get(item.id) ?? null));
  }
  for (let index = 0; index < items.length; index++) {
    if (results[index] !== null) continue;
    const item = items[index]!;
    const { event, set } = outcomeWrite(ctx.engine, item);
    const key = { ...item, concurrencyKey: item.concurrencyKey === null ? undefined : item.concurrencyKey };
    results[index] = await transition(ctx, event, key, set);
  }
  return results;
}

/** The items that `take` accepts, grouped by what they write (see `groupKey`), with their places in the batch. */
function groupItems(ctx: StoreContext, items: readonly SettleItem[], take: (item: SettleItem, index: number) => boolean): Map<string, Group> {
  const groups = new Map<string, Group>();
  // A batch's items mostly write alike (completions at one time): the previous item's group is tried first.
  let previous: { item: SettleItem; group: Group } | null = null;
  items.forEach((item, index) => {
    if (!take(item, index)) return;
    let group = previous !== null && sameWrite(previous.item, item) ? previous.group : undefined;
    if (group === undefined) {
      const key = groupKey(item);
      group = groups.get(key);
      if (group === undefined) groups.set(key, (group = { ...outcomeWrite(ctx.engine, item), now: item.now, items: [], indexes: [] }));
      previous = { item, group };
    }
    group.items.push(item);
    group.indexes.push(index);
  });
  return groups;
}

/**
 * Keyed groups inside the caller's transaction: locks the items' keys, applies
 * each group to the jobs of those keys, then promotes the keys whose slots
 * the moved jobs freed, and announces the queues that gained ready jobs.
 */
async function settleKeyed(ctx: StoreContext, db: AnyDb, groups: Group[]): Promise<Map<number, SettledJob>> {
  const names = [...new Set(groups.flatMap((g) => g.items.map((i) => i.concurrencyKey as string)))];
  const limits = await lockKeys(ctx, db, names);
  const keyOf = new Map<number, string>();
  const moved = await settleGroups(ctx, db, groups, [...limits.keys()], keyOf);
  const freed = new Map<string, number>();
  let now = 0;
  for (const group of groups) {
    now = Math.max(now, group.now);
    if (!freesSlot(group.event)) continue;
    for (const item of group.items) {
      const key = keyOf.get(item.id);
      if (typeof key === "string" && limits.has(key)) freed.set(key, limits.get(key)!);
    }
  }
  if (freed.size === 0) return moved;
  const { queues } = await promote(ctx, db, freed, now);
  await ctx.engine.announceReady(db, [...queues].map((queue) => ({ queue, due: false })));
  return moved;
}

/** Unkeyed items that write alike (one event, one set of columns, at one time), with their places in the batch. */
interface Group extends Write {
  now: number;
  items: SettleItem[];
  indexes: number[];
}

/**
 * Applies each group to its jobs: those without a key (`keys` null), or
 * those whose key is one of `keys` (locked by the caller); the records that
 * moved, by id (and into `keyOf`, when given, the key of each). A write that
 * ends jobs passes over those with children (`childless`), unless
 * `withChildren`: then, in the caller's transaction, it takes them too and
 * settles their children (the children it released are reported on the
 * first job it moved, SettledJob.released).
 */
async function settleGroups(ctx: StoreContext, db: AnyDb, groups: Group[], keys: readonly string[] | null, keyOf?: Map<number, string>, withChildren = false): Promise<Map<number, SettledJob>> {
  const { tables, engine } = ctx;
  const moved = new Map<number, SettledJob>();
  if (keys !== null && keys.length === 0) return moved;
  for (const { event, set, now, items } of groups) {
    let rows: SettledRow[];
    const token = items[0]!.leaseToken;
    if (!withChildren && keys === null && event === "complete" && engine.capabilities.arrays && engine.capabilities.returning && items.every((i) => i.leaseToken === token)) {
      // The common batch, completions from one claim: compiled once, its values as slots.
      const values = { ids: [...new Set(items.map((i) => i.id))], token, now, result: (set as { result: unknown }).result };
      rows = (await db.executeQuery(compiledOnce(ctx.statements, "settle:complete", () => slottedCompletion(ctx), values, PLANNED_EACH_RUN))).rows as SettledRow[];
    } else {
      // deno-lint-ignore no-explicit-any
      const keyed = <Q extends { where: (...args: any[]) => any }>(q: Q): Q => keys === null ? guardMany(q, event, items, engine.capabilities).where("concurrency_key", "is", null) : guardMany(q, event, items, engine.capabilities).where("concurrency_key", "in", keys);
      // A job with children to settle is left to `transition` (a miss here), which settles them.
      // deno-lint-ignore no-explicit-any
      const fenced = <Q extends { where: (...args: any[]) => any }>(q: Q): Q => (endsJob(event) && !withChildren ? childless(keyed(q)) : keyed(q));
      const update = labelled(fenced(db.updateTable(tables.jobs).set({ ...set, state: TRANSITIONS[event].to, updated_at: now })), event);
      if (engine.capabilities.returning) {
        rows = (await update.returning(SETTLED_COLUMNS).execute()) as SettledRow[];
      } else {
        // Lock the rows that pass the fence, write them, read them back: all under this transaction's locks.
        let pick = fenced(db.selectFrom(tables.jobs).select("id"));
        if (engine.capabilities.rowLocks) pick = pick.forUpdate();
        const ids = ((await pick.execute()) as { id: number | string }[]).map((r) => Number(r.id));
        if (ids.length === 0) continue;
        await update.where("id", "in", ids).execute();
        rows = (await db.selectFrom(tables.jobs).select(SETTLED_COLUMNS).where("id", "in", ids).execute()) as SettledRow[];
      }
    }
    for (const r of rows) {
      moved.set(Number(r.id), rowToSettled(r));
      if (keyOf && typeof r.concurrency_key === "string") keyOf.set(Number(r.id), r.concurrency_key);
    }
    if (withChildren && endsJob(event) && rows.length > 0) {
      // Edges are read after the parents' row locks were granted: an enqueue that named one has committed them.
      const released = await settleChildren(ctx, db, rows.map((r) => ({ id: Number(r.id), state: TRANSITIONS[event].to })), now);
      if (released.length > 0) moved.set(Number(rows[0]!.id), { ...moved.get(Number(rows[0]!.id))!, released });
    }
    if (event === "release") await engine.announceReady(db, rows.map((r) => ({ queue: r.queue, due: false })));
  }
  return moved;
}

/**
 * The completion of unkeyed jobs under one token, with slots `ids`,
 * `token`, `now` and `result` (see `compiledOnce`), without its RETURNING:
 * the common batch's write here, and a hand-off's `done` (hand-off.ts).
 */
export function slottedCompletionUpdate(ctx: StoreContext) {
  const now = new Slot("now");
  const complete = { kind: "complete", now, result: new Slot("result") } as unknown as SettleItem;
  const { set } = outcomeWrite(ctx.engine, complete);
  const update = ctx.db.updateTable(ctx.tables.jobs).set({ ...set, state: TRANSITIONS.complete.to, updated_at: now });
  return childless(guardOneToken(update, "complete", new Slot("ids"), new Slot("token"), ctx.engine.capabilities).where("concurrency_key", "is", null));
}

/** `slottedCompletionUpdate` returning the settled columns. */
function slottedCompletion(ctx: StoreContext) {
  return labelled(slottedCompletionUpdate(ctx).returning(SETTLED_COLUMNS), "complete");
}

/** Whether two items write the same columns with the same values (as `groupKey` tells, without building it). */
function sameWrite(a: SettleItem, b: SettleItem): boolean {
  if (a.kind !== b.kind || a.now !== b.now) return false;
  if (a.kind === "complete") return (a.result ?? "") === ((b as typeof a).result ?? "");
  if (a.kind === "fail") return a.error === (b as typeof a).error && a.retryAt === (b as typeof a).retryAt;
  return true;
}

/** Items that write the same columns with the same values, so one statement serves them all. */
function groupKey(item: SettleItem): string {
  if (item.kind === "fail") return `fail\u0000${item.now}\u0000${item.retryAt}\u0000${item.error}`;
  // Completions that return a value each write their own (one statement each, in the batch's transaction).
  return item.kind === "complete" ? `complete\u0000${item.now}\u0000${item.result ?? ""}` : `${item.kind}\u0000${item.now}`;
}
