import { InvalidArgumentError } from "./errors.ts";
import type { JobState } from "./states.ts";
import { checkKeys, checkObject, MAX_DELAY_MS, validateInteger, validateName } from "./validate.ts";

/**
 * A debounce key: while a job enqueued with this key is pending (not yet
 * claimed), a later enqueue with the key and the same task and queue does
 * not store a new job but merges into that one (see `mergedRunAt`). Keys
 * are scoped to (queue, task): the same key under another task or queue is
 * another burst.
 */
export interface DebounceSpec {
  key: string;
  /** The pending job runs this long after the burst's latest enqueue. */
  delayMs: number;
  /** ...but never later than this long after the burst's first enqueue (the pending job's createdAt); null: no bound. */
  maxWaitMs: number | null;
}

/**
 * The states of a pending job, the one a debounced enqueue merges into. At
 * most one job per (queue, task, key) is in one of them: each schema has a
 * unique index over these states (its predicate spells them as literals).
 * Debounced jobs never have a concurrency key, so in practice never blocked;
 * blocked is listed so the rule holds whatever admission does.
 */
export const DEBOUNCE_PENDING_STATES: readonly JobState[] = ["scheduled", "ready", "blocked"];

/** Validates `value` as an enqueue's `debounce` option (named `${at}debounce` in messages). */
export function validateDebounce(value: unknown, at: string): DebounceSpec {
  const what = `${at}debounce`;
  if (value === undefined) throw new InvalidArgumentError(`${what} must be an object { key, delayMs, maxWaitMs? }, got undefined`);
  checkObject(value, what, " { key, delayMs, maxWaitMs? }");
  checkKeys(value, ["key", "delayMs", "maxWaitMs"], what);
  const v = value as { key?: unknown; delayMs?: unknown; maxWaitMs?: unknown };
  const key = validateName(v.key, `${what}.key`);
  // Zero would make a burst's job ready at once: nothing would be left to merge into but the race with the claim.
  const delayMs = validateInteger(v.delayMs, `${what}.delayMs`, 1, MAX_DELAY_MS);
  const maxWaitMs = v.maxWaitMs === undefined ? null : validateInteger(v.maxWaitMs, `${what}.maxWaitMs (at least delayMs, ${delayMs})`, delayMs, MAX_DELAY_MS);
  return { key, delayMs, maxWaitMs };
}

/**
 * Pure merge policy: the run time of the pending job created at `createdAt`
 * when an enqueue with `spec` merges into it at `now`: `delayMs` after this
 * enqueue, but never later than `maxWaitMs` (this enqueue's) after the
 * burst's first. Adapters call it while they hold the pending row.
 */
export function mergedRunAt(spec: DebounceSpec, createdAt: number, now: number): number {
  const latest = now + spec.delayMs;
  return spec.maxWaitMs === null ? latest : Math.min(latest, createdAt + spec.maxWaitMs);
}
