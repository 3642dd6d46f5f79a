import type { NewJob } from "./adapter.ts";
import type { JobRecord } from "./job.ts";

/**
 * The record of a job `job` just stored with id `id` at `now`, as its row
 * holds it: attempt 0, and null in every column a claim, an outcome or a
 * handler writes later. An adapter that knows the values it wrote (and the
 * id the row got) returns this instead of reading the row back.
 */
export function newJobRecord(id: number, job: NewJob, now: number): JobRecord {
  return {
    id,
    task: job.task,
    queue: job.queue,
    payload: job.payload,
    state: job.state,
    priority: job.priority,
    runAt: job.runAt,
    attempt: 0,
    maxAttempts: job.maxAttempts,
    backoff: job.backoff,
    concurrencyKey: job.concurrency?.key ?? null,
    onConflict: job.concurrency?.onConflict ?? null,
    rateKey: job.rateLimit?.key ?? null,
    fairKey: job.fairness?.key || null,
    timeoutMs: job.timeoutMs ?? null,
    leaseToken: null,
    leaseExpiresAt: null,
    createdAt: now,
    updatedAt: now,
    startedAt: null,
    finishedAt: null,
    lastError: null,
    idempotencyKey: job.idempotencyKey ?? null,
    debounceKey: job.debounce?.key ?? null,
    traceContext: job.traceContext ?? null,
    result: null,
    progress: null,
    worker: null,
    errors: null,
    steps: null,
  };
}
