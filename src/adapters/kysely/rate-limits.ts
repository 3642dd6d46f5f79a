/**
 * Rate limits in storage: a queue's and a task's limit live on its control
 * row, a rate key's in the rate keys table; each row holds its log of
 * starts (see core/rate-limit.ts). A claim locks a limit's row exclusively,
 * reads its room, and rewrites its log in the same transaction: two claims
 * never both take the last start of a window (R20). The rules are the
 * core's; this module reads and writes rows.
 */
import type { NewJob } from "../../core/adapter.ts";
import { logStarts, nextRoomAt, rateRoom, rateSlack, readStarts, type RateLimit } from "../../core/rate-limit.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { rateLimitOf, upsert, type RateColumns } from "./controls.ts";
import { labelled } from "./labels.ts";

/** The rate columns a claim reads with a control row. */
export const RATE_COLUMNS = ["rate_limit", "rate_period_ms", "rate_starts", "rate_held_until"] as const;

/**
 * Stores the rate keys a batch names (the last job's limit for a key named
 * twice), and marks their queues as holding rate-keyed jobs (their claims
 * then apply the limits). Reads first: an enqueue whose key and queue are
 * already stored as given writes neither, and does not wait for claims that
 * hold them. Queue rows are written before key rows (the claim's lock order).
 */
export async function storeRateKeys(ctx: StoreContext, db: AnyDb, jobs: readonly NewJob[]): Promise<void> {
  const limits = new Map<string, RateLimit>();
  const queues = new Set<string>();
  for (const j of jobs) {
    if (!j.rateLimit) continue;
    limits.set(j.rateLimit.key, { limit: j.rateLimit.limit, periodMs: j.rateLimit.periodMs });
    queues.add(j.queue);
  }
  if (limits.size === 0) return;
  const { tables } = ctx;
  const marked = (await db.selectFrom(tables.queues).select("name").where("name", "in", [...queues]).where("keyed_rate", "=", 1).execute()) as { name: string }[];
  for (const queue of [...queues].sort()) {
    if (marked.some((r) => r.name === queue)) continue;
    await upsert(ctx, db, tables.queues, { name: queue, paused: 0, max_running: null, keyed_rate: 1 }, { keyed_rate: 1 });
  }
  const stored = (await db.selectFrom(tables.rateKeys).select(["name", "rate_limit", "rate_period_ms"]).where("name", "in", [...limits.keys()]).execute()) as (RateColumns & { name: string })[];
  for (const name of [...limits.keys()].sort()) {
    const limit = limits.get(name)!;
    const row = stored.find((r) => r.name === name);
    const now = row && rateLimitOf(row);
    if (now && now.limit === limit.limit && now.periodMs === limit.periodMs) continue;
    const values = { rate_limit: limit.limit, rate_period_ms: limit.periodMs, rate_held_until: null };
    await upsert(ctx, db, tables.rateKeys, { name, ...values }, values);
  }
}

/** A rate limit as a claim holds it: where it is stored, its limit, and its log when read. */
export interface HeldLimit {
  table: string;
  name: string;
  limit: RateLimit;
  starts: string | null;
  /** When it next has room, as the last claim that left it with none wrote it (null: never written). */
  heldUntil: number | null;
}

/** The limit a control or rate key row holds, or null. */
export function heldLimit(table: string, row: RateColumns & { name: string }): HeldLimit | null {
  const limit = rateLimitOf(row);
  const heldUntil = row.rate_held_until === null || row.rate_held_until === undefined ? null : Number(row.rate_held_until);
  return limit && { table, name: row.name, limit, starts: row.rate_starts ?? null, heldUntil };
}

/** Starts left at `now`. */
export function roomOf(held: HeldLimit, now: number): number {
  return rateRoom(readStarts(held.starts), held.limit.limit, held.limit.periodMs, now);
}

/** Starts a claim may take unconstrained at `now` (see core rateSlack). */
export function slackOf(held: HeldLimit, now: number): number {
  return rateSlack(readStarts(held.starts), held.limit.limit, held.limit.periodMs, now);
}

/** When a limit without room next has some. */
export function roomAt(held: HeldLimit, now: number): number {
  return nextRoomAt(readStarts(held.starts), held.limit.limit, held.limit.periodMs, now);
}

/**
 * The rate keys among `names` with their limits and logs, locked for the
 * rest of the transaction (in name order), where the engine has row locks.
 */
export async function lockRateKeys(ctx: StoreContext, db: AnyDb, names: readonly string[]): Promise<HeldLimit[]> {
  if (names.length === 0) return [];
  let q = db.selectFrom(ctx.tables.rateKeys).select(["name", ...RATE_COLUMNS]).where("name", "in", [...names]).orderBy("name");
  if (ctx.engine.capabilities.rowLocks) q = q.forUpdate();
  const rows = (await labelled(q, "rate-lock").execute()) as (RateColumns & { name: string })[];
  return rows.map((r) => heldLimit(ctx.tables.rateKeys, r)).filter((h): h is HeldLimit => h !== null);
}

/**
 * Logs `count` starts at `now` on a limit this transaction holds locked
 * (`held` then holds the new log); with `full` (the claim left the limit
 * no room), also writes when it next has room, and returns that time.
 * Writes nothing when neither changes.
 */
export async function logTaken(ctx: StoreContext, db: AnyDb, held: HeldLimit, now: number, count: number, full: boolean): Promise<number | null> {
  const { set, starts, until } = takenLog(held, now, count, full);
  held.starts = starts;
  if (Object.keys(set).length > 0) await labelled(db.updateTable(held.table).set(set).where("name", "=", held.name), "rate-log").execute();
  return until;
}

/** What `logTaken` would write of `held`'s row (`set`: no column when nothing changes), its new log, and what it would return; writes nothing. */
export function takenLog(held: HeldLimit, now: number, count: number, full: boolean): { set: Record<string, unknown>; starts: string | null; until: number | null } {
  const set: Record<string, unknown> = {};
  const starts = count > 0 ? logStarts(readStarts(held.starts), now, count, held.limit.periodMs) : held.starts;
  if (count > 0) set.rate_starts = starts;
  const until = full ? roomAt({ ...held, starts }, now) : null;
  if (until !== null && until !== held.heldUntil) set.rate_held_until = until;
  return { set, starts, until };
}
