/**
 * The constraints the SQL adapters' schemas put on a stored job and on a
 * control (NOT NULL, CHECK), checked by the memory adapter before it writes
 * anything: a value a database would refuse is refused here too, as
 * AdapterError, and the call changes nothing.
 */
import type { NewJob } from "../../core/adapter.ts";
import { AdapterError } from "../../core/errors.ts";
import { isJobState } from "../../core/states.ts";

function isJson(text: unknown): boolean {
  if (typeof text !== "string") return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

const isInteger = (v: unknown, min = Number.MIN_SAFE_INTEGER): boolean => typeof v === "number" && Number.isSafeInteger(v) && v >= min;
const isName = (v: unknown): boolean => typeof v === "string" && v.length > 0;

/** The first constraint `job` breaks, or null. */
function violation(job: NewJob): string | null {
  if (!isName(job.task)) return "task must be a non-empty string";
  if (!isName(job.queue)) return "queue must be a non-empty string";
  if (!isJson(job.payload)) return "payload must be JSON text";
  if (!isJobState(job.state) || (job.state !== "ready" && job.state !== "scheduled")) return `a new job's state must be ready or scheduled, got ${String(job.state)}`;
  if (!isInteger(job.priority) || !isInteger(job.runAt)) return "priority and runAt must be integers";
  if (!isInteger(job.maxAttempts, 1)) return "maxAttempts must be an integer >= 1";
  if (job.backoff !== null && !isJson(job.backoff)) return "backoff must be null or JSON text";
  const c = job.concurrency;
  if (c) {
    if (!isName(c.key)) return "a concurrency key must be a non-empty string";
    if (!isInteger(c.limit, 1)) return "a concurrency key's limit must be an integer >= 1";
    if (c.onConflict !== "block" && c.onConflict !== "discard") return "onConflict must be block or discard";
  }
  if (job.timeoutMs != null && !isInteger(job.timeoutMs, 1)) return "timeoutMs must be null or an integer >= 1";
  if (job.idempotencyKey != null && !isName(job.idempotencyKey)) return "an idempotency key must be a non-empty string";
  const r = job.rateLimit;
  if (r) {
    if (!isName(r.key)) return "a rate key must be a non-empty string";
    if (!isInteger(r.limit, 1) || !isInteger(r.periodMs, 1)) return "a rate key's limit and periodMs must be integers >= 1";
  }
  if (job.debounce != null && !isName(job.debounce.key)) return "a debounce key must be a non-empty string";
  const f = job.fairness;
  if (f) {
    if (!isName(f.key)) return "a fairness key must be a non-empty string";
    if (!isInteger(f.weight, 1)) return "a fairness key's weight must be an integer >= 1";
  }
  return null;
}

/** Throws AdapterError naming the first job of `jobs` that breaks a constraint; nothing has been written. */
export function checkNewJobs(jobs: readonly NewJob[], name: string): void {
  jobs.forEach((job, i) => {
    const broken = violation(job);
    if (broken !== null) throw new AdapterError(`${name}: job ${i} of the batch refused (${broken}); nothing was stored`);
  });
}

/** Throws AdapterError when a cap is neither null nor an integer >= 1. */
export function checkCap(cap: number | null | undefined, name: string): void {
  if (cap != null && !isInteger(cap, 1)) throw new AdapterError(`${name}: maxRunning must be null or an integer >= 1, got ${String(cap)}`);
}

/** Throws AdapterError when a rate limit is neither null/absent nor integers limit >= 1 and periodMs >= 1. */
export function checkRateLimit(limit: { limit: number; periodMs: number } | null | undefined, name: string): void {
  if (limit == null) return;
  if (!isInteger(limit.limit, 1) || !isInteger(limit.periodMs, 1)) throw new AdapterError(`${name}: a rate limit needs integers limit >= 1 and periodMs >= 1, got ${JSON.stringify(limit)}`);
}
