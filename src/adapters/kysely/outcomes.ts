import { sql } from "kysely";
import type { FailParams, SettleItem, SettleParams, SettledJob } from "../../core/adapter.ts";
import { TRANSITIONS, type TransitionEvent } from "../../core/transitions.ts";
import { ERROR_HISTORY } from "../../core/job.ts";
import type { AnyDb, Engine } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { guardMany } from "./guard.ts";
import { transition } from "./guarded-write.ts";
import { SETTLED_COLUMNS, rowToSettled, type SettledRow } from "./row.ts";

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
 * statement per distinct write, all in one unit of work. Keyed jobs, jobs
 * named twice (a stale attempt beside a fresh one: results are matched by
 * id), and misses (a lost race, or a key after all): one transition each,
 * with the key's promotion.
 */
export async function settle(ctx: StoreContext, params: SettleParams): Promise<(SettledJob | null)[]> {
  const results: (SettledJob | null)[] = params.items.map(() => null);
  const writes = params.items.map((item, index) => ({ index, item, ...outcomeWrite(ctx.engine, item) }));
  const seen = new Map<number, number>();
  for (const w of writes) seen.set(w.item.id, (seen.get(w.item.id) ?? 0) + 1);
  const groups = new Map<string, typeof writes>();
  for (const w of writes) {
    if (w.item.concurrencyKey !== null || seen.get(w.item.id)! > 1) continue;
    const id = groupKey(w.item);
    const group = groups.get(id);
    if (group) group.push(w);
    else groups.set(id, [w]);
  }
  if (groups.size > 0) {
    const run = (db: AnyDb) => settleGroups(ctx, db, [...groups.values()]);
    const rows = await (groups.size === 1 ? ctx.engine.writeStatement(ctx.db, run) : ctx.engine.writeTransaction(ctx.db, run));
    for (const group of groups.values()) for (const w of group) results[w.index] = rows.get(w.item.id) ?? null;
  }
  for (const w of writes) {
    if (results[w.index] !== null) continue;
    const key = { ...w.item, concurrencyKey: w.item.concurrencyKey === null ? undefined : w.item.concurrencyKey };
    results[w.index] = await transition(ctx, w.event, key, w.set);
  }
  return results;
}

/** Applies each group (one event, one set of columns) to its unkeyed jobs; the records that moved, by id. */
async function settleGroups(ctx: StoreContext, db: AnyDb, groups: (Write & { item: SettleItem })[][]): Promise<Map<number, SettledJob>> {
  const { tables, engine } = ctx;
  const moved = new Map<number, SettledJob>();
  for (const group of groups) {
    const { event, set, item } = group[0]!;
    const keys = group.map((w) => ({ id: w.item.id, leaseToken: w.item.leaseToken }));
    // deno-lint-ignore no-explicit-any
    const fenced = <Q extends { where: (...args: any[]) => any }>(q: Q): Q => guardMany(q, event, keys, engine.capabilities).where("concurrency_key", "is", null);
    const update = fenced(db.updateTable(tables.jobs).set({ ...set, state: TRANSITIONS[event].to, updated_at: item.now }));
    let rows: SettledRow[];
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
    for (const r of rows) moved.set(Number(r.id), rowToSettled(r));
    if (event === "release") await engine.announceReady(db, rows.map((r) => ({ queue: r.queue, due: false })));
  }
  return moved;
}

/** Items that write the same columns with the same values, so one statement serves them all. */
function groupKey(item: SettleItem): string {
  if (item.kind === "fail") return `fail\u0000${item.now}\u0000${item.retryAt}\u0000${item.error}`;
  // Completions that return a value each write their own (one statement each, in the batch's transaction).
  return item.kind === "complete" ? `complete\u0000${item.now}\u0000${item.result ?? ""}` : `${item.kind}\u0000${item.now}`;
}
