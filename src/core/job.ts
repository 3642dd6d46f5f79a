import type { JobState } from "./states.ts";
import type { RateLimitRef } from "./rate-limit.ts";
import { readSteps, type Step } from "./steps.ts";

/** A job as stored. Times are epoch milliseconds. */
export interface JobRecord {
  id: number;
  task: string;
  queue: string;
  /** The payload as stored: a JSON text. */
  payload: string;
  state: JobState;
  priority: number;
  runAt: number;
  /** Attempts started so far (a claim increments it; a release gives it back). */
  attempt: number;
  maxAttempts: number;
  /** Per-job backoff overrides as JSON text (a partial RetryPolicy), or null. */
  backoff: string | null;
  /** The concurrency key, or null. */
  concurrencyKey: string | null;
  /** What happens when the key is full at admission (also when a delayed or retried job falls due); null without a key. */
  onConflict: "block" | "discard" | null;
  /** The rate key (see EnqueueOptions.rateLimit), or null. */
  rateKey: string | null;
  /** The fairness key (see EnqueueOptions.fairness), or null. */
  fairKey: string | null;
  /** Set by a claim only: true for a job of a fair queue that has its place there (absent otherwise). */
  fairQueue?: true;
  /** Time limit of one attempt in ms, or null (the worker's default applies). */
  timeoutMs: number | null;
  leaseToken: string | null;
  leaseExpiresAt: number | null;
  createdAt: number;
  updatedAt: number;
  /** When its latest attempt started: the claim that gave it to a handler (the claim's time); null before the first. */
  startedAt: number | null;
  finishedAt: number | null;
  lastError: string | null;
  /** The idempotency key the job was enqueued with, while it holds it (see EnqueueOptions.idempotencyKey), or null. */
  idempotencyKey: string | null;
  /**
   * The debounce key it was enqueued with (see EnqueueOptions.debounce) while it waits for its first run,
   * or null: a claim clears it, so a job that ran (and is retried, released or replayed) is never merged into.
   */
  debounceKey: string | null;
  /** The trace context of the enqueue that created it (a propagation carrier as JSON; see DocketOptions.tracing), or null. */
  traceContext: string | null;
  /** A succeeded job's handler return value as JSON text; null when it returned undefined (or has not succeeded). */
  result: string | null;
  /** The last progress its handler recorded (`ctx.progress`), as JSON text, or null. */
  progress: string | null;
  /** The name of the worker that claimed it last (see WorkerOptions.name), or null if none has. */
  worker: string | null;
  /** Its failed attempts, oldest first, as a JSON array of AttemptError (the last ERROR_HISTORY.entries), or null if none failed. */
  errors: string | null;
  /** Its recorded durable steps (`ctx.step`), oldest first, as a JSON array of Step, or null if none was recorded. */
  steps: string | null;
  /**
   * Only on a record a claim returns: the rate limit that held the job back
   * after it fell due (of its queue's, task's and key's limits, the first
   * that had no room at some moment between its run time and this claim),
   * or absent when none did. Not stored.
   */
  delayedBy?: RateLimitRef;
}

/** One failed attempt as the job's error history keeps it. */
export interface AttemptError {
  /** The attempt's number (1 for the first). */
  attempt: number;
  /** When it failed (the handler threw or timed out, or its lease expired), epoch ms. */
  at: number;
  /** The error text, cut to ERROR_HISTORY.chars characters (`lastError` keeps the whole text). */
  error: string;
  /** The worker that ran the attempt (WorkerOptions.name), or null. */
  worker: string | null;
}

/** How much of the error history a job keeps: the newest `entries` failed attempts, each error cut to `chars` characters. */
export const ERROR_HISTORY = { entries: 20, chars: 2000 } as const;

/** A job with its payload, result and progress parsed, as the public API returns it. */
export interface Job<P = unknown> extends Omit<JobRecord, "payload" | "result" | "progress" | "errors" | "steps" | "delayedBy"> {
  payload: P;
  /** What the handler returned, for a succeeded job (null when it returned undefined or nothing yet). */
  result: unknown;
  /** The last value the handler passed to `ctx.progress`, or null. */
  progress: unknown;
  /** Its failed attempts, oldest first (the newest ERROR_HISTORY.entries). */
  errors: AttemptError[];
  /** Its recorded durable steps (`ctx.step`), oldest first. */
  steps: Step[];
  /** For a job a worker runs: the rate limit that held it back after it fell due (see JobRecord.delayedBy), else null. */
  delayedBy: RateLimitRef | null;
}

/**
 * The public form of `record`: payload, result, progress and errors parsed.
 * Fields are copied one by one: spreading a record (whose times are doubles)
 * and then replacing fields cost twice as much per job in the worker.
 */
export function toJob<P = unknown>(r: JobRecord): Job<P> {
  return {
    id: r.id,
    task: r.task,
    queue: r.queue,
    payload: JSON.parse(r.payload) as P,
    state: r.state,
    priority: r.priority,
    runAt: r.runAt,
    attempt: r.attempt,
    maxAttempts: r.maxAttempts,
    backoff: r.backoff,
    concurrencyKey: r.concurrencyKey,
    onConflict: r.onConflict,
    rateKey: r.rateKey,
    fairKey: r.fairKey,
    timeoutMs: r.timeoutMs,
    leaseToken: r.leaseToken,
    leaseExpiresAt: r.leaseExpiresAt,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    startedAt: r.startedAt,
    finishedAt: r.finishedAt,
    lastError: r.lastError,
    idempotencyKey: r.idempotencyKey,
    debounceKey: r.debounceKey,
    traceContext: r.traceContext,
    result: r.result === null ? null : JSON.parse(r.result),
    progress: r.progress === null ? null : JSON.parse(r.progress),
    worker: r.worker,
    errors: r.errors === null ? [] : (JSON.parse(r.errors) as AttemptError[]),
    steps: readSteps(r.steps ?? null),
    delayedBy: r.delayedBy ?? null,
  };
}

/** Map of task name → payload type, for typed enqueue and handlers. */
export type TaskMap = Record<string, unknown>;

/**
 * A job of one of `T`'s tasks, as a typed Docket reads it back: testing
 * `task` narrows `payload` to that task's. A type only: the job is what was
 * stored, by this or any other process, so a job of a task `T` does not
 * name can come back too (keep a default branch in a switch on `task`).
 */
export type TaskJob<T extends TaskMap> = { [K in keyof T & string]: Job<T[K]> & { task: K } }[keyof T & string];

/**
 * How long the latest attempt ran: until `now` while running, until it
 * finished for a job that succeeded or died; null otherwise (never started,
 * waiting for its next attempt, or cancelled, which may have come before
 * the attempt that `startedAt` dates).
 */
export function attemptRuntime(j: Pick<JobRecord, "state" | "startedAt" | "finishedAt">, now: number): number | null {
  if (j.startedAt === null) return null;
  if (j.state === "running") return Math.max(0, now - j.startedAt);
  if ((j.state === "succeeded" || j.state === "dead") && j.finishedAt !== null) return Math.max(0, j.finishedAt - j.startedAt);
  return null;
}
