/**
 * Recurring jobs, the policy: what a schedule is, and its ticks (parsing a
 * cron expression in a time zone, the latest tick due, the next one). The
 * service that stores and fires schedules is src/client/schedules.ts.
 */
import { Cron } from "croner";
import { InvalidArgumentError } from "./errors.ts";
import type { PutScheduleParams } from "./adapter.ts";
import type { Job } from "./job.ts";
import { clipped, shown } from "./shown.ts";

/** The enqueue options a schedule's jobs may carry (a schedule has no runAt, delay or idempotency key of its own). */
export interface ScheduleJobOptions {
  queue?: string;
  priority?: number;
  maxAttempts?: number;
  timeoutMs?: number;
}

export interface ScheduleDefinition<P = unknown> {
  /** Five fields (minute hour day month weekday), six with seconds first, or seven with seconds first and a year (1–9999) last; or a nickname (`@hourly`…, not `@reboot`), or an ISO 8601 date-time (one tick). croner's syntax (`*`, lists, ranges, steps, `?`, names, `L`, `W`, `#`, `+`); docs/operating.md "Recurring jobs". */
  cron: string;
  /** IANA time zone the expression is read in. Default "UTC". */
  timezone?: string;
  task: string;
  payload?: P;
  options?: ScheduleJobOptions;
}

export interface Schedule {
  name: string;
  cron: string;
  timezone: string;
  task: string;
  queue: string;
  payload: unknown;
  options: ScheduleJobOptions;
  /** The last tick that fired (or, for a schedule that never fired, the latest tick before it was created). */
  lastTickAt: number;
  /** The next tick after now, or null when the expression has none left. */
  nextTickAt: number | null;
  /**
   * Ticks after the last one that fired which are over MISSED_AFTER_MS old
   * and never fired (no scheduler ran then), counted up to MISSED_COUNT_CAP;
   * and the first of them (null when none). A scheduler that comes back
   * fires the latest due one once, not each missed tick.
   */
  missedTicks: number;
  firstMissedAt: number | null;
  /** Paused: it fires no tick until resumed (then from its next tick; ticks while paused are not missed, they are skipped). */
  paused: boolean;
}

export interface FiredTick {
  schedule: string;
  tick: number;
  job: Job;
}

/** The longest cron expression a schedule may have: MariaDB's column holds 191 characters, and every adapter keeps the same rule. */
export const MAX_CRON_LENGTH = 191;

/** The parsed expression; InvalidArgumentError for a bad expression or time zone (or an expression over MAX_CRON_LENGTH). */

export function parseCron(cron: unknown, timezone: unknown): Cron {
  if (typeof cron !== "string" || cron.trim() === "") throw new InvalidArgumentError(`cron must be a cron expression, got ${shown(cron)}`);
  if (cron.length > MAX_CRON_LENGTH) throw new InvalidArgumentError(`cron must be at most ${MAX_CRON_LENGTH} characters (what every adapter stores), got ${cron.length}: ${shown(cron)}`);
  if (typeof timezone !== "string" || timezone === "") throw new InvalidArgumentError(`timezone must be an IANA time zone name, got ${shown(timezone)}`);
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
  } catch {
    throw new InvalidArgumentError(`timezone ${shown(timezone)} is not an IANA time zone name (e.g. "Europe/Berlin")`);
  }
  try {
    return new Cron(cron, { timezone, paused: true });
  } catch (error) {
    // croner's message quotes the expression: cut like any value in a message.
    throw new InvalidArgumentError(`cron ${shown(cron)} is not a valid expression: ${clipped(String((error as Error)?.message ?? error))}`);
  }
}

/**
 * The next tick after `now`; InvalidArgumentError when there is none: the
 * expression matches no date (`0 0 31 2 *`), or none after `now` (a year
 * field in the past). A schedule must fire, so `put` refuses it.
 */
export function firstTick(cron: Cron, expression: string, now: number): number {
  let next: number | null;
  try {
    next = nextTick(cron, now);
  } catch (error) {
    throw new InvalidArgumentError(`cron ${shown(expression)} cannot be evaluated: ${clipped(String((error as Error)?.message ?? error))}`);
  }
  if (next !== null) return next;
  const last = latestTick(cron, now);
  throw new InvalidArgumentError(
    last === null
      ? `cron ${shown(expression)} never fires: no date matches it`
      : `cron ${shown(expression)} never fires again: its last tick was ${new Date(last).toISOString()}`,
  );
}

/** How far back `latestTick` looks when croner cannot walk back: one Gregorian cycle, after which the calendar repeats. */
const LOOKBACK_MS = 400 * 365.2425 * 24 * 3600_000;

/** The latest tick at or before `now` (ticks fall on whole seconds), or null. */
export function latestTick(cron: Cron, now: number): number | null {
  const until = now - (now % 1_000) + 1_000;
  try {
    const run = cron.previousRuns(1, new Date(until))[0];
    return run === undefined ? null : run.getTime();
  } catch {
    // croner 10 throws a TypeError walking back to some ticks of an earlier year (`0 0 29 2 *` after 2024):
    // found with forward steps instead, and remembered until the next tick (a scheduler asks every second).
    const known = bisected.get(cron);
    if (known !== undefined && (known.tick ?? -Infinity) < until && until <= known.next) return known.tick;
    const tick = latestTickBefore(cron, until);
    bisected.set(cron, { tick, next: cron.nextRun(new Date(until - 1_000))?.getTime() ?? Number.POSITIVE_INFINITY });
    return tick;
  }
}

/** Per expression, the last `latestTickBefore` answer and the first tick after it: the answer until then. */
const bisected = new WeakMap<Cron, { tick: number | null; next: number }>();

/**
 * The latest tick before `until` (whole seconds), by bisection over start
 * points: `nextRun(s)` (the first tick after s) grows with s, so the last s
 * whose next tick is before `until` gives the latest tick. About 40 steps.
 */
function latestTickBefore(cron: Cron, until: number): number | null {
  const nextAfter = (s: number) => cron.nextRun(new Date(s * 1_000))?.getTime() ?? Number.POSITIVE_INFINITY;
  let lo = Math.floor((until - LOOKBACK_MS) / 1_000);
  let hi = until / 1_000 - 1;
  if (nextAfter(lo) >= until) return null;
  // Invariant: nextAfter(lo) < until; the answer's start point is in [lo, hi].
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (nextAfter(mid) < until) lo = mid;
    else hi = mid - 1;
  }
  return nextAfter(lo);
}

/** A running scheduler fires a due tick within about its interval (1 s by default): a tick older than this that did not fire was missed. */
export const MISSED_AFTER_MS = 60_000;
/** Missed ticks are counted up to this many (a schedule every second, down for a day, shows "1000+"). */
export const MISSED_COUNT_CAP = 1_000;

/** The ticks after `lastTick` and at or before `now - MISSED_AFTER_MS` (none of them fired): how many, up to MISSED_COUNT_CAP, and the first. */
export function missedTicks(cron: Cron, lastTick: number, now: number): { count: number; first: number | null } {
  let count = 0;
  let first: number | null = null;
  for (let at = lastTick; count < MISSED_COUNT_CAP; count++) {
    const next = cron.nextRun(new Date(at))?.getTime();
    if (next === undefined || next > now - MISSED_AFTER_MS) break;
    first ??= next;
    at = next;
  }
  return { count, first };
}

export function nextTick(cron: Cron, now: number): number | null {
  return cron.nextRun(new Date(now))?.getTime() ?? null;
}

/** Whether a stored schedule's definition (cron, timezone, task, queue, payload, options) is the one `p` puts (see DocketAdapter.putSchedule). */
export function sameDefinition(stored: Pick<PutScheduleParams, "cron" | "timezone" | "task" | "queue" | "payload" | "options">, p: PutScheduleParams): boolean {
  return stored.cron === p.cron && stored.timezone === p.timezone && stored.task === p.task && stored.queue === p.queue && stored.payload === p.payload && stored.options === p.options;
}
