/**
 * `new Docket(options)`: the options, their defaults, and their check, in
 * the order messages report them. Bad options throw InvalidArgumentError.
 */
import type { DocketAdapter } from "../core/adapter.ts";
import { systemClock, type Clock } from "../core/clock.ts";
import { InvalidArgumentError } from "../core/errors.ts";
import type { TaskMap } from "../core/job.ts";
import { DEFAULT_RETRY_POLICY, resolveRetryPolicy, type RetryPolicy } from "../core/retry.ts";
import { MAX_DELAY_MS, checkKeys, checkObject, validateInteger, validateName } from "../core/validate.ts";
import type { EnqueueTracing } from "./enqueue.ts";
import type { Retention } from "./sweeper.ts";
import type { TaskOptions } from "./tasks.ts";

export interface DocketOptions<T extends TaskMap> {
  adapter: DocketAdapter;
  /**
   * Registered tasks. When given, enqueueing a task not listed here is an
   * UnknownTaskError; when omitted, any non-empty task name is accepted.
   */
  tasks?: { [K in keyof T]: TaskOptions<T[K]> };
  /** Default retry policy for every task. */
  retry?: Partial<RetryPolicy>;
  /**
   * Wraps every enqueue (see EnqueueTracing):
   * `openTelemetry().tracing` from "docket/otel" opens a producer span and
   * stores its context with the jobs. Default: none (no cost).
   */
  tracing?: EnqueueTracing;
  /** Largest accepted payload, in UTF-8 bytes of its JSON. Default 1 MiB. */
  maxPayloadBytes?: number;
  /** Queue of jobs that name none. Default "default". */
  defaultQueue?: string;
  clock?: Clock;
  /** Source of randomness in [0, 1) for backoff jitter. Default Math.random. */
  random?: () => number;
  /**
   * How long finished jobs are kept before `purgeFinished()` (which every
   * worker runs about once a minute) deletes them. `finishedMs`: succeeded
   * and cancelled jobs, default 7 days; `deadMs`: dead letters, default 30
   * days. `null` keeps them forever.
   */
  retention?: RetentionOptions;
  /**
   * How long an idempotency key holds after its job finished (succeeded,
   * cancelled or dead): `keyHoldAfterFinishMs`, in ms. 0: only while the job
   * is live (scheduled, ready, blocked, running); `null` (default): until the
   * finished job is deleted by retention. Once released, an enqueue with the
   * key creates a new job, which takes the key over.
   */
  idempotency?: { keyHoldAfterFinishMs?: number | null };
}

export interface RetentionOptions {
  finishedMs?: number | null;
  deadMs?: number | null;
}

/** The options with every default applied, checked; `tasks` as given (TaskRegistry checks it). */
export interface ResolvedOptions {
  adapter: DocketAdapter;
  tracing: EnqueueTracing | null;
  clock: Clock;
  random: () => number;
  retry: RetryPolicy;
  maxPayloadBytes: number;
  defaultQueue: string;
  retention: Retention;
  keyHoldAfterFinishMs: number | null;
}

const DOCKET_OPTION_KEYS = ["adapter", "tasks", "retry", "maxPayloadBytes", "defaultQueue", "clock", "random", "retention", "idempotency", "tracing"] as const;
const DAY_MS = 24 * 3600_000;

/** Checks `options` (all but `tasks`) and applies the defaults. */
export function resolveOptions<T extends TaskMap>(options: DocketOptions<T>): ResolvedOptions {
  if (options === undefined) throw new InvalidArgumentError("new Docket({ adapter }) needs an adapter");
  checkObject(options, "new Docket(options)", " { adapter, … }");
  if (typeof options.adapter !== "object" || options.adapter === null) {
    throw new InvalidArgumentError("new Docket({ adapter }) needs an adapter");
  }
  checkKeys(options, DOCKET_OPTION_KEYS, "new Docket(options)");
  if (options.tracing !== undefined && (typeof options.tracing !== "object" || options.tracing === null || typeof options.tracing.enqueue !== "function")) {
    throw new InvalidArgumentError("tracing must be an object with an enqueue(jobs, store) method (see docket/otel)");
  }
  const retry = resolveRetryPolicy(DEFAULT_RETRY_POLICY, options.retry);
  const maxPayloadBytes = validateInteger(options.maxPayloadBytes ?? 1024 * 1024, "maxPayloadBytes", 2, 1 << 30);
  const defaultQueue = validateName(options.defaultQueue ?? "default", "defaultQueue");
  checkKeys(options.retention, ["finishedMs", "deadMs"], "retention");
  const keep = (value: number | null | undefined, fallback: number, what: string) =>
    value === null ? null : validateInteger(value ?? fallback, what, 0, MAX_DELAY_MS);
  const retention = {
    finishedMs: keep(options.retention?.finishedMs, 7 * DAY_MS, "retention.finishedMs"),
    deadMs: keep(options.retention?.deadMs, 30 * DAY_MS, "retention.deadMs"),
  };
  checkKeys(options.idempotency, ["keyHoldAfterFinishMs"], "idempotency");
  const hold = options.idempotency?.keyHoldAfterFinishMs;
  const keyHoldAfterFinishMs = hold === undefined || hold === null ? null : validateInteger(hold, "idempotency.keyHoldAfterFinishMs", 0, MAX_DELAY_MS);
  return {
    adapter: options.adapter,
    tracing: options.tracing ?? null,
    clock: options.clock ?? systemClock,
    random: options.random ?? Math.random,
    retry,
    maxPayloadBytes,
    defaultQueue,
    retention,
    keyHoldAfterFinishMs,
  };
}
