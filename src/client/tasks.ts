/**
 * The task registry and job building: the options of a task and of one
 * enqueue, their checks, and `newJob`, which turns an enqueue item into the
 * NewJob an adapter stores (task defaults applied, every field validated).
 * Bad input throws a DocketError; nothing here writes.
 */
import type { NewJob } from "../core/adapter.ts";
import { validateConcurrency, type ConcurrencySpec, type OnConflict } from "../core/concurrency.ts";
import { validateRateLimitSpec } from "../core/rate-limit.ts";
import { validateDebounce } from "../core/debounce.ts";
import { validateFairness } from "../core/fairness.ts";
import type { ParentRef } from "../core/dependencies.ts";
import { InvalidArgumentError, UnknownTaskError } from "../core/errors.ts";
import type { TaskMap } from "../core/job.ts";
import { BACKOFF_KEYS, validateRetryPolicy, type RetryPolicy } from "../core/retry.ts";
import { clipped, shown } from "../core/shown.ts";
import {
  MAX_ATTEMPTS_LIMIT,
  MAX_PRIORITY,
  MAX_TIMEOUT_MS,
  MIN_PRIORITY,
  checkKeys,
  checkObject,
  serializePayload,
  validateDuration,
  validateInteger,
  validateName,
  validateTime,
} from "../core/validate.ts";

export type BackoffOptions = Partial<Omit<RetryPolicy, "maxAttempts">>;

/** A concurrency key for every job of a task; the key may be computed from the payload. */
export interface TaskConcurrency<P = unknown> {
  key: string | ((payload: P) => string);
  limit: number;
  onConflict?: OnConflict;
}

/** Defaults for one task; every enqueue of it may override them. */
export interface TaskOptions<P = unknown> {
  queue?: string;
  priority?: number;
  maxAttempts?: number;
  backoff?: BackoffOptions;
  concurrency?: TaskConcurrency<P>;
  /** Time limit of one attempt of this task's jobs, in ms (see EnqueueOptions.timeoutMs). */
  timeoutMs?: number;
}

export interface EnqueueOptions {
  queue?: string;
  /** Smaller runs first. Integer in [-1e6, 1e6]; default 0. */
  priority?: number;
  /** Earliest start, as a Date or epoch ms. Exclusive with `delay`. */
  runAt?: Date | number;
  /** Earliest start, in ms from now. Exclusive with `runAt`. */
  delay?: number;
  maxAttempts?: number;
  /** Per-job backoff overrides; stored with the job. */
  backoff?: BackoffOptions;
  /**
   * At most `limit` jobs with this key are admitted (ready or running) at
   * once; others wait as blocked (`onConflict: "block"`, the default) or are
   * stored cancelled (`"discard"`). Overrides the task's concurrency.
   */
  concurrency?: { key: string; limit: number; onConflict?: OnConflict };
  /**
   * At most `limit` jobs with this rate key start within any window of
   * `periodMs`, across every worker and process (a sliding window; see
   * docs/flow-control.md "Rate limits"). A job over it stays ready, spends no attempt,
   * and starts when the window has room. The key's stored limit is the
   * last enqueue's. Works beside the queue's and task's rate limits, caps
   * and concurrency keys: a job starts only when all of them allow it.
   */
  rateLimit?: { key: string; limit: number; periodMs: number };
  /**
   * Fair sharing within the job's queue: claims serve the queue's fairness
   * keys in weighted round-robin, up to `weight` jobs of a key per round
   * (integer 1–1000, default 1; the key's stored weight is the last
   * enqueue's), claim order within a key. The queue's jobs without a key
   * share one implicit key of weight 1. See docs/flow-control.md "Fair sharing".
   */
  fairness?: { key: string; weight?: number };
  /**
   * Time limit of one attempt, in ms (integer, 1 ms to 24 h). Past it the
   * handler's signal aborts and the attempt fails with a timeout reason.
   * Overrides the task's; stored with the job. Default: the worker's `timeoutMs`.
   */
  timeoutMs?: number;
  /**
   * At most one job holds an idempotency key at a time: an enqueue with a key
   * a job holds stores nothing and returns that job with `created: false`,
   * also when N callers race with one key from separate connections or
   * processes (exactly one creates it; none sees an error for the key). A
   * key holds while its job is live, and after it finished for
   * `idempotency.keyHoldAfterFinishMs` (default: until the job is purged).
   * A key names one job across all tasks: when a job of another task holds
   * it (or an earlier item of another task in the same `enqueueMany` names
   * it), the call is refused with IdempotencyConflictError and stores
   * nothing, no item of an `enqueueMany` included. Non-empty, at most 191
   * characters. See `getByIdempotencyKey`.
   */
  idempotencyKey?: string;
  /**
   * Debounce: while a job of this queue, task and `key` is pending (not yet
   * claimed), this enqueue stores nothing new but merges into that job and
   * returns it with `created: false`: its payload and options become this
   * enqueue's (the last wins) and it runs `delayMs` from now, but never
   * later than `maxWaitMs` after the burst's first enqueue. Once the job is
   * claimed, the next enqueue with the key starts a new burst. `delayMs`:
   * integer in [1, 100 years]; `maxWaitMs`: integer >= delayMs, optional.
   * Refused (InvalidArgumentError) together with `runAt`/`delay` (debounce
   * decides the run time), `idempotencyKey` (first wins vs last wins) and a
   * concurrency key (own or the task's).
   */
  debounce?: { key: string; delayMs: number; maxWaitMs?: number };
  /**
   * Parents: the job waits (state waiting) until every one of them has
   * succeeded, then is scheduled at its own run time (`runAt`/`delay`) and
   * runs through its controls like any due job. It is released in the
   * transaction that records its last parent's success, exactly once, with
   * no sweep. A parent that ends dead or cancelled cancels its waiting
   * descendants, the reason naming it. A parent is a job id or, inside one
   * `enqueueMany`, `{ ref: name }` naming the item whose `ref` is `name`, so
   * a whole graph is stored in one call. 1 to 1000 parents, each named once.
   * A parent that does not exist is NotFoundError, one already dead or
   * cancelled InvalidArgumentError, a cycle of refs InvalidArgumentError: the
   * call stores nothing. Refused beside `debounce`.
   */
  after?: readonly ParentRef[];
}

export type EnqueueItem<T extends TaskMap, K extends keyof T & string = keyof T & string> = {
  // One member per task: an item's payload is checked against its own task's (a wrong payload for a named task does not compile).
  [P in K]: {
    task: P;
    payload: T[P];
    options?: EnqueueOptions;
    /** This item's name for `after: [{ ref }]` of the other items of the same `enqueueMany`. */
    ref?: string;
  };
}[K];

/** What job building needs of its docket: the defaults a job gets where neither its task nor its enqueue says. */
export interface JobDefaults {
  readonly retry: RetryPolicy;
  readonly defaultQueue: string;
  readonly maxPayloadBytes: number;
}

/**
 * The registered tasks (or none: then any valid task name is accepted) and
 * the building of jobs from enqueue items. The registry is validated whole
 * at construction and never changes.
 */
export class TaskRegistry {
  /** null: no `tasks` option, every task name is accepted. */
  readonly #tasks: Map<string, TaskOptions> | null;

  constructor(
    tasks: Record<string, TaskOptions | undefined> | undefined,
    readonly defaults: JobDefaults,
  ) {
    checkObject(tasks, "tasks");
    if (tasks === undefined) {
      this.#tasks = null;
      return;
    }
    this.#tasks = new Map();
    for (const [name, task] of Object.entries(tasks)) {
      validateName(name, "task name");
      // undefined: registered without options; null and other non-objects are refused.
      const own = task === undefined ? {} : task;
      this.#validateTaskOptions(name, own);
      this.#tasks.set(name, own);
    }
  }

  /** Each registered task's queue (`defaultQueue` for one registered without a queue); empty without a registry. */
  queues(): Map<string, string> {
    return new Map([...(this.#tasks ?? [])].map(([task, options]) => [task, options.queue ?? this.defaults.defaultQueue]));
  }

  /** The backoff a registered task sets, if any. */
  backoffOf(task: string): BackoffOptions | undefined {
    return this.#tasks?.get(task)?.backoff;
  }

  /**
   * The job `item` enqueues at `now`, validated. `at` prefixes every message
   * ("": the one item of `enqueue`, which is docket's own object; "items[3].":
   * an item of `enqueueMany`, the caller's, which may hold only task, payload
   * and options).
   */
  newJob<T extends TaskMap>(item: EnqueueItem<T>, now: number, at: string): NewJob {
    const label = at === "" ? "item" : at.slice(0, -1);
    if (item === undefined) throw new InvalidArgumentError(`${label} must be an object, got undefined`);
    if (at === "") checkObject(item, label);
    else checkKeys(item, ITEM_KEYS, label);
    const task = item.task;
    if (typeof task !== "string" || task.length === 0) throw new UnknownTaskError(String(task), `${at}task must be a non-empty string, got ${shown(task)}`);
    validateName(task, `${at}task`);
    let defaults: TaskOptions = {};
    if (this.#tasks) {
      const registered = this.#tasks.get(task);
      if (!registered) throw new UnknownTaskError(task, `unknown task ${shown(task)}: registered tasks are ${clipped([...this.#tasks.keys()].join(", "))}`);
      defaults = registered;
    }
    checkKeys(item.options, ENQUEUE_OPTION_KEYS, `${at}options`);
    const o = item.options ?? {};
    if (o.runAt !== undefined && o.delay !== undefined) throw new InvalidArgumentError(`${at}runAt and delay are exclusive`);
    const runAt =
      o.runAt !== undefined ? validateTime(o.runAt, `${at}runAt`) : o.delay !== undefined ? now + validateDuration(o.delay, `${at}delay`) : now;
    const { retry, defaultQueue, maxPayloadBytes } = this.defaults;
    const queue = validateName(o.queue ?? defaults.queue ?? defaultQueue, `${at}queue`);
    const priority = validateInteger(o.priority ?? defaults.priority ?? 0, `${at}priority`, MIN_PRIORITY, MAX_PRIORITY);
    const maxAttempts = validateInteger(o.maxAttempts ?? defaults.maxAttempts ?? retry.maxAttempts, `${at}maxAttempts`, 1, MAX_ATTEMPTS_LIMIT);
    let backoff: string | null = null;
    if (o.backoff !== undefined) {
      checkKeys(o.backoff, BACKOFF_KEYS, `${at}options.backoff`);
      validateRetryPolicy({ ...retry, ...o.backoff, maxAttempts });
      backoff = JSON.stringify(o.backoff);
    }
    const payload = serializePayload(item.payload, maxPayloadBytes);
    const concurrency = concurrencyFor(item, defaults, at);
    const timeout = o.timeoutMs ?? defaults.timeoutMs;
    const timeoutMs = timeout === undefined ? null : validateInteger(timeout, `${at}timeoutMs`, 1, MAX_TIMEOUT_MS);
    const idempotencyKey = o.idempotencyKey === undefined ? null : validateName(o.idempotencyKey, `${at}idempotencyKey`);
    const rateLimit = o.rateLimit === undefined ? null : validateRateLimitSpec(o.rateLimit, `${at}options.`);
    const fairness = o.fairness === undefined ? null : validateFairness(o.fairness, `${at}options.`);
    if (o.debounce !== undefined) {
      const debounce = validateDebounce(o.debounce, `${at}options.`);
      const refused = o.runAt !== undefined ? "runAt" : o.delay !== undefined ? "delay" : idempotencyKey !== null ? "idempotencyKey" : concurrency !== null ? "a concurrency key" : o.after !== undefined ? "after" : null;
      if (refused !== null) throw new InvalidArgumentError(`${at}options.debounce cannot be combined with ${refused}: ${DEBOUNCE_REFUSALS[refused]}`);
      return { task, queue, payload, state: "scheduled", priority, runAt: now + debounce.delayMs, maxAttempts, backoff, concurrency: null, timeoutMs, idempotencyKey: null, debounce, rateLimit, fairness };
    }
    return { task, queue, payload, state: runAt > now ? "scheduled" : "ready", priority, runAt, maxAttempts, backoff, concurrency, timeoutMs, idempotencyKey, rateLimit, fairness };
  }

  #validateTaskOptions(name: string, o: TaskOptions): void {
    const at = `tasks.${name}.`;
    checkKeys(o, TASK_OPTION_KEYS, `tasks.${name}`);
    if (o.backoff !== undefined) checkKeys(o.backoff, BACKOFF_KEYS, `${at}backoff`);
    if (o.queue !== undefined) validateName(o.queue, `${at}queue`);
    if (o.priority !== undefined) validateInteger(o.priority, `${at}priority`, MIN_PRIORITY, MAX_PRIORITY);
    if (o.maxAttempts !== undefined) validateInteger(o.maxAttempts, `${at}maxAttempts`, 1, MAX_ATTEMPTS_LIMIT);
    if (o.backoff !== undefined) validateRetryPolicy({ ...this.defaults.retry, ...o.backoff });
    if (o.timeoutMs !== undefined) validateInteger(o.timeoutMs, `${at}timeoutMs`, 1, MAX_TIMEOUT_MS);
    if (o.concurrency !== undefined) {
      const key = typeof o.concurrency.key === "function" ? "computed" : o.concurrency.key;
      validateConcurrency({ ...o.concurrency, key }, at);
    }
  }
}

/** The item's own concurrency, else its task's (the key computed from the payload when the task gives a function). */
function concurrencyFor<T extends TaskMap>(item: EnqueueItem<T>, defaults: TaskOptions, at: string): ConcurrencySpec | null {
  const own = item.options?.concurrency;
  if (own !== undefined) return validateConcurrency(own, `${at}options.`);
  const task = defaults.concurrency;
  if (task === undefined) return null;
  let key: unknown = task.key;
  if (typeof task.key === "function") {
    try {
      key = task.key(item.payload);
    } catch (error) {
      throw new InvalidArgumentError(`${at}concurrency key function of task ${shown(item.task)} threw: ${clipped(String(error))}`);
    }
  }
  return validateConcurrency({ ...task, key }, at);
}

const TASK_OPTION_KEYS = ["queue", "priority", "maxAttempts", "backoff", "concurrency", "timeoutMs"] as const;
const ITEM_KEYS = ["task", "payload", "options", "ref"] as const;
const ENQUEUE_OPTION_KEYS = ["queue", "priority", "runAt", "delay", "maxAttempts", "backoff", "concurrency", "rateLimit", "fairness", "timeoutMs", "idempotencyKey", "debounce", "after"] as const;

/** Why `debounce` is refused beside each option (see EnqueueOptions.debounce). */
const DEBOUNCE_REFUSALS: Record<string, string> = {
  runAt: "a debounced job runs delayMs after the burst's last enqueue",
  delay: "a debounced job runs delayMs after the burst's last enqueue",
  idempotencyKey: "an idempotency key keeps the first enqueue, a debounce key the last",
  "a concurrency key": "moving an admitted job back to waiting would free its key's slot inside the enqueue; not supported yet",
  after: "a debounced job is merged into while it waits for its run time, a child waits for its parents",
};
