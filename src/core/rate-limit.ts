/**
 * Rate limits, as one rule: at most `limit` jobs of a queue, a task or a
 * rate key start within any window of `periodMs` (a sliding window: a
 * start counts while less than `periodMs` has passed since it). A start is
 * the claim that gives the job to a handler. The log of starts is kept as
 * JSON text of `[time, count]` pairs, oldest first, holding only the starts
 * still inside the last two windows (the second for `rateSlack`); adapters store it with the limit and rewrite it,
 * under the limit's lock, in the claim that takes the starts. Nothing here
 * reads storage.
 *
 * Claims take their time (`now`) before they wait for a limit's lock, so a
 * claim may find starts logged at a later time than its own. The window is
 * then judged at the newest logged start (`windowEnd`): a claim never counts
 * the window at a time before a start it can see, and logs its own starts
 * there. Otherwise a later claim that dropped old starts from the log would
 * hide them from an earlier one, which would count them free again.
 *
 * Why a sliding window and not a token bucket: a bucket of `limit` tokens
 * refilled every `periodMs` lets 2 × `limit` start across a refill's edge,
 * and "at most `limit` in any window" forbids that.
 */
import { InvalidArgumentError } from "./errors.ts";
import { shown } from "./shown.ts";
import { MAX_DELAY_MS, checkKeys, checkObject, validateInteger, validateName } from "./validate.ts";

/** At most `limit` starts within any window of `periodMs`. */
export interface RateLimit {
  limit: number;
  periodMs: number;
}

/** A rate limit given at enqueue, shared by every job that names `key`. */
export interface RateLimitSpec extends RateLimit {
  key: string;
}

/** Largest accepted limit: a start log holds at most this many entries. */
export const MAX_RATE_LIMIT = 100_000;
/** Longest accepted period: 31 days. */
export const MAX_RATE_PERIOD_MS = 31 * 24 * 3600_000;

/** A limit for a setter: `{ limit, periodMs }`, or null for "no limit"; InvalidArgumentError otherwise. */
export function validateRateLimit(value: unknown, what: string): RateLimit | null {
  if (value === null) return null;
  if (value === undefined) throw new InvalidArgumentError(`${what} must be { limit, periodMs } or null, got undefined`);
  checkObject(value, what, " { limit, periodMs }");
  checkKeys(value, ["limit", "periodMs"], what);
  return checkedLimit(value as Partial<RateLimit>, what);
}

/** An enqueue's `rateLimit: { key, limit, periodMs }`; InvalidArgumentError otherwise. */
export function validateRateLimitSpec(value: unknown, at: string): RateLimitSpec {
  const what = `${at}rateLimit`;
  if (value === undefined || value === null) throw new InvalidArgumentError(`${what} must be an object { key, limit, periodMs }, got ${shown(value)}`);
  checkObject(value, what, " { key, limit, periodMs }");
  checkKeys(value, ["key", "limit", "periodMs"], what);
  const v = value as Partial<RateLimitSpec>;
  const key = validateName(v.key, `${what}.key`);
  return { key, ...checkedLimit(v, what) };
}

function checkedLimit(v: Partial<RateLimit>, what: string): RateLimit {
  const limit = validateInteger(v.limit, `${what}.limit`, 1, MAX_RATE_LIMIT);
  const periodMs = validateInteger(v.periodMs, `${what}.periodMs`, 1, Math.min(MAX_RATE_PERIOD_MS, MAX_DELAY_MS));
  return { limit, periodMs };
}

/** A start log's entries: `[time, count]`, oldest first. */
export type StartLog = [number, number][];

/** The entries of stored log text (null or unreadable: none). */
export function readStarts(text: string | null | undefined): StartLog {
  if (text === null || text === undefined || text === "") return [];
  try {
    const parsed = JSON.parse(text) as unknown;
    return Array.isArray(parsed) ? (parsed.filter((e) => Array.isArray(e) && e.length === 2) as StartLog) : [];
  } catch {
    return [];
  }
}

/** Where a claim at `now` judges the window: `now`, or the newest start in `log` when that is later. */
export function windowEnd(log: StartLog, now: number): number {
  let end = now;
  for (const [at] of log) if (at > end) end = at;
  return end;
}

/**
 * The time a claim at `now` stamps as the start of the jobs it took (their
 * startedAt; their updatedAt stays the claim's `now`):
 * the latest `windowEnd` of the logs of the limits it took starts of (each
 * log as read, before the claim's own starts), so a job's recorded start is
 * the time its limit logged it, never earlier.
 */
export function claimedAt(taken: readonly { log: StartLog; count: number }[], now: number): number {
  let at = now;
  for (const { log, count } of taken) if (count > 0) at = Math.max(at, windowEnd(log, now));
  return at;
}

/** How many starts of `log` are inside the window that ends at `now`. */
export function startsInWindow(log: StartLog, now: number, periodMs: number): number {
  let used = 0;
  for (const [at, n] of log) if (now - at < periodMs) used += n;
  return used;
}

/** How many more jobs may start at `now` (never negative; a lowered limit may leave none). */
export function rateRoom(log: StartLog, limit: number, periodMs: number, now: number): number {
  return Math.max(0, limit - startsInWindow(log, windowEnd(log, now), periodMs));
}

/**
 * Starts a claim may take of a limit beyond its room for constrained jobs
 * (see claim-order.ts isConstrained): those that leave the window at most
 * half used, and the last two windows together (2 × `periodMs`) at most
 * one window's `limit`. A limit that binds has no slack (its last two
 * windows hold about 2 × `limit`), nor one that starts binding past half
 * its window.
 */
export function rateSlack(log: StartLog, limit: number, periodMs: number, now: number): number {
  const end = windowEnd(log, now);
  const left = limit - startsInWindow(log, end, periodMs);
  return Math.max(0, Math.min(left - Math.ceil(limit / 2), limit - startsInWindow(log, end, 2 * periodMs)));
}

/** The log text after `count` starts at `now` (at `windowEnd`): the entries that left the last two windows (see rateSlack) dropped. */
export function logStarts(log: StartLog, now: number, count: number, periodMs: number): string {
  now = windowEnd(log, now);
  const kept = log.filter(([at]) => now - at < 2 * periodMs);
  if (count > 0) {
    const last = kept[kept.length - 1];
    if (last && last[0] === now) last[1] += count;
    else kept.push([now, count]);
  }
  return JSON.stringify(kept);
}

/**
 * When a limit with no room at `now` next has room: the time its oldest
 * start in the window leaves it (enough starts leave to free one unit).
 * `now` when it has room already.
 */
export function nextRoomAt(log: StartLog, limit: number, periodMs: number, now: number): number {
  now = windowEnd(log, now);
  let used = startsInWindow(log, now, periodMs);
  if (used < limit) return now;
  for (const [at, n] of log) {
    if (now - at >= periodMs) continue;
    used -= n;
    if (used < limit) return at + periodMs;
  }
  return now;
}

/** The identity of a limit in a claim's room: what it limits, and the name. */
export type RateScope = "queue" | "task" | "key";

/** A rate limit by what it limits and its name: a queue's, a task's, or a rate key's. */
export interface RateLimitRef {
  scope: RateScope;
  name: string;
}

/** The order a job's limits are named in when several held it back. */
const SCOPE_ORDER: readonly RateScope[] = ["queue", "task", "key"];

/**
 * The limit that held back `job` (its claim's `delayedBy`): of the job's
 * limits, in scope order, the first whose `heldUntil` (when it next had
 * room, as the claim that left it with none wrote it; read before this
 * claim wrote anything) is after the job's run time: the limit had no room
 * at some moment after the job fell due. Null when none did.
 */
export function delayingLimit(
  job: { queue: string; task: string; rateKey: string | null; runAt: number },
  limits: readonly { scope: RateScope; name: string; heldUntil: number | null }[],
): RateLimitRef | null {
  for (const scope of SCOPE_ORDER) {
    const name = scope === "queue" ? job.queue : scope === "task" ? job.task : job.rateKey;
    const l = limits.find((x) => x.scope === scope && x.name === name);
    if (l && l.heldUntil !== null && l.heldUntil > job.runAt) return { scope, name: l.name };
  }
  return null;
}
