/**
 * Retry policy: the policy's fields and defaults, how overrides merge, the
 * backoff delay, and the one home of "plan a failure" (where a failed
 * attempt goes), shared by the worker's outcomes and the lease sweep.
 */
import { InvalidArgumentError } from "./errors.ts";
import type { JobRecord } from "./job.ts";
import { shown } from "./shown.ts";
import { MAX_DELAY_MS, checkKeys } from "./validate.ts";

/** The fields of a retry policy, for option checks. */
export const RETRY_POLICY_KEYS = ["maxAttempts", "baseMs", "factor", "maxMs", "jitter"] as const;

/** The fields a job's or a task's `backoff` may override (all but maxAttempts, which is its own option). */
export const BACKOFF_KEYS = RETRY_POLICY_KEYS.filter((k) => k !== "maxAttempts");

/**
 * Retry policy: how many attempts a job gets and how long to wait between
 * them. The delay before attempt n+1 is `min(maxMs, baseMs * factor^(n-1))`,
 * then spread by `jitter` (0 = exact, 1 = anywhere in [0, delay]).
 */
export interface RetryPolicy {
  maxAttempts: number;
  baseMs: number;
  factor: number;
  maxMs: number;
  jitter: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  maxAttempts: 5,
  baseMs: 1_000,
  factor: 2,
  maxMs: 60 * 60 * 1_000,
  jitter: 0.2,
};

/** Merge overrides (per task, then per job) over a base policy, validating the result. */
export function resolveRetryPolicy(base: RetryPolicy, ...overrides: (Partial<RetryPolicy> | undefined)[]): RetryPolicy {
  const merged = { ...base };
  for (const o of overrides) {
    if (o === undefined) continue;
    checkKeys(o, RETRY_POLICY_KEYS, "a retry policy");
    for (const [k, v] of Object.entries(o)) if (v !== undefined) (merged as Record<string, number>)[k] = v as number;
  }
  validateRetryPolicy(merged);
  return merged;
}

export function validateRetryPolicy(p: RetryPolicy): void {
  if (!Number.isSafeInteger(p.maxAttempts) || p.maxAttempts < 1) {
    throw new InvalidArgumentError(`maxAttempts must be an integer >= 1, got ${shown(p.maxAttempts)}`);
  }
  for (const key of ["baseMs", "maxMs"] as const) {
    if (!Number.isFinite(p[key]) || p[key] < 0 || p[key] > MAX_DELAY_MS) {
      throw new InvalidArgumentError(`${key} must be a number of milliseconds in [0, ${MAX_DELAY_MS}] (100 years), got ${shown(p[key])}`);
    }
  }
  if (!Number.isFinite(p.factor) || p.factor < 1) throw new InvalidArgumentError(`factor must be a finite number >= 1, got ${shown(p.factor)}`);
  if (!Number.isFinite(p.jitter) || p.jitter < 0 || p.jitter > 1) throw new InvalidArgumentError(`jitter must be in [0, 1], got ${shown(p.jitter)}`);
}

/** Delay in whole ms before the next attempt, after `attempt` (1-based) failed; at most `maxMs`. `random` returns [0, 1). */
export function backoffDelay(attempt: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const exact = policy.baseMs === 0 ? 0 : Math.min(policy.maxMs, policy.baseMs * Math.pow(policy.factor, Math.max(0, attempt - 1)));
  const spread = exact * policy.jitter * random();
  return Math.round(exact - spread);
}

export type FailurePlan = { kind: "retry"; runAt: number } | { kind: "bury" };

/** Pure: what a failed attempt leads to. `attempt` is the attempt that failed (1-based). */
export function planFailure(attempt: number, maxAttempts: number, now: number, policy: RetryPolicy, random?: () => number): FailurePlan {
  if (attempt >= maxAttempts) return { kind: "bury" };
  return { kind: "retry", runAt: now + backoffDelay(attempt, policy, random) };
}

/**
 * The retry policy that applies to `job`: `base` (the docket's), then its
 * task's `taskBackoff`, then the job's own stored overrides, with the job's
 * maxAttempts. Only known fields of the stored overrides count: a row
 * written by an older docket may hold others.
 */
export function jobRetryPolicy(job: Pick<JobRecord, "backoff" | "maxAttempts">, base: RetryPolicy, taskBackoff?: Partial<RetryPolicy>): RetryPolicy {
  const stored = job.backoff === null ? {} : (JSON.parse(job.backoff) as Record<string, unknown>);
  const own = Object.fromEntries(Object.entries(stored).filter(([k]) => (BACKOFF_KEYS as readonly string[]).includes(k))) as Partial<RetryPolicy>;
  return resolveRetryPolicy(base, taskBackoff, own, { maxAttempts: job.maxAttempts });
}

/**
 * Pure: where a failed attempt of `job` goes at `now` (the attempt that
 * failed is `job.attempt`), under jobRetryPolicy(job, base, taskBackoff).
 * Every failure docket writes, a handler's or an expired lease's, is planned here.
 */
export function planJobFailure(
  job: Pick<JobRecord, "attempt" | "maxAttempts" | "backoff">,
  now: number,
  base: RetryPolicy,
  taskBackoff: Partial<RetryPolicy> | undefined,
  random: () => number,
): FailurePlan {
  return planFailure(job.attempt, job.maxAttempts, now, jobRetryPolicy(job, base, taskBackoff), random);
}

/**
 * Pause before the next try after `consecutive` (>= 1) failures in a row of
 * an infrastructure call (a claim, an outcome write): `baseMs * 2^(n-1)`,
 * capped at `maxMs`, minus up to half of it at random so that many workers
 * do not retry in step. Always an integer in [ceil(delay / 2), delay].
 */
export function errorBackoffDelay(consecutive: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const exact = Math.min(maxMs, baseMs * Math.pow(2, Math.max(0, Math.min(consecutive - 1, 30))));
  return Math.ceil(exact - (exact / 2) * random());
}
