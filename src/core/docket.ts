import type { DocketAdapter, NewJob, QueueControl, TaskControl } from "./adapter.ts";
import { validateCap, validateConcurrency, type ConcurrencySpec, type OnConflict } from "./concurrency.ts";
import { systemClock, type Clock } from "./clock.ts";
import { Scheduler, Schedules } from "./schedules.ts";
import { dashboard, type DashboardHandler, type DashboardOptions } from "../dashboard/index.ts";
import { shapeStats, type DocketStats, type StatsOptions } from "./stats.ts";
import { EventHub, type DocketEvent, type DocketEventType, type EventOf } from "./events.ts";
import { InvalidArgumentError, InvalidStateError, NotFoundError, UnknownTaskError, WaitTimeoutError } from "./errors.ts";
import { clipped, shown } from "./shown.ts";
import { toJob, type Job, type JobRecord } from "./job.ts";
import { DEFAULT_RETRY_POLICY, RETRY_POLICY_KEYS, planFailure, resolveRetryPolicy, validateRetryPolicy, type RetryPolicy } from "./retry.ts";
import { JOB_STATES, TERMINAL_STATES, isJobState, type JobState } from "./states.ts";
import {
  MAX_ATTEMPTS_LIMIT,
  MAX_DELAY_MS,
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
} from "./validate.ts";
import { Worker, type WorkerOptions } from "../worker/index.ts";
import type { WorkerHost } from "../client/host.ts";
import { PayloadLimit } from "./payload-limit.ts";

const EVENT_TYPES: ReadonlySet<string> = new Set<DocketEventType>([
  "enqueued",
  "started",
  "succeeded",
  "retried",
  "dead",
  "released",
  "cancelled",
  "reclaimed",
  "replayed",
  "lost",
  "keyRepaired",
  "error",
]);

/** Map of task name → payload type, for typed enqueue and handlers. */
export type TaskMap = Record<string, unknown>;

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

/**
 * A wrapper around every enqueue call: it gets the jobs about to be
 * stored and must call `store` once, with the trace context to store with
 * them (a propagation carrier as JSON text, or null), returning its result.
 * What it throws fails the enqueue. docket/otel implements it.
 */
export interface EnqueueTracing {
  enqueue<R>(jobs: readonly { task: string; queue: string }[], store: (traceContext: string | null) => Promise<R>): Promise<R>;
}

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

/**
 * Enqueue in the caller's own open transaction: a kysely `Transaction` on the
 * adapter's database (every adapter) or, on PostgreSQL, a `pg` client inside
 * BEGIN. The jobs exist if and only if that transaction commits.
 */
export interface InTransaction {
  transaction?: object;
}

/** What `enqueue` returns: the job, and whether this call created it (false: its idempotency key was held by this job). */
export type EnqueuedJob<P = unknown> = Job<P> & { created: boolean };

export interface RetentionOptions {
  finishedMs?: number | null;
  deadMs?: number | null;
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
}

export interface EnqueueItem<T extends TaskMap, K extends keyof T & string = keyof T & string> {
  task: K;
  payload: T[K];
  options?: EnqueueOptions;
}

export interface ListOptions {
  state?: JobState;
  queue?: string;
  task?: string;
  afterId?: number;
  /** Default 100, at most 10 000. */
  limit?: number;
}

/** What `reclaimExpired` did: jobs whose expired lease it turned into a retry or a dead letter. */
export interface ReclaimResult {
  retried: number;
  dead: number;
}

/**
 * The queue: validates input, plans every transition with the core policy
 * and applies it through the adapter. Bad input throws a DocketError before
 * anything is written.
 */
export class Docket<T extends TaskMap = TaskMap> {
  readonly adapter: DocketAdapter;
  readonly clock: Clock;
  readonly retry: RetryPolicy;
  readonly maxPayloadBytes: number;
  readonly defaultQueue: string;
  readonly random: () => number;
  readonly retention: { finishedMs: number | null; deadMs: number | null };
  /** See DocketOptions.idempotency. */
  readonly keyHoldAfterFinishMs: number | null;
  readonly #tasks: Map<string, TaskOptions> | null;
  /** Workers of this docket, told about the queues of ready jobs it just enqueued. */
  readonly #enqueueListeners = new Set<(queues: ReadonlySet<string>, due: boolean) => void>();
  /** Workers of this docket, told about the jobs it cancelled. */
  readonly #cancelListeners = new Set<(id: number) => void>();
  readonly #events = new EventHub();
  readonly #tracing: EnqueueTracing | null;
  readonly #payloadLimit: PayloadLimit;

  constructor(options: DocketOptions<T>) {
    if (options === undefined) throw new InvalidArgumentError("new Docket({ adapter }) needs an adapter");
    checkObject(options, "new Docket(options)", " { adapter, … }");
    if (typeof options.adapter !== "object" || options.adapter === null) {
      throw new InvalidArgumentError("new Docket({ adapter }) needs an adapter");
    }
    checkKeys(options, DOCKET_OPTION_KEYS, "new Docket(options)");
    this.adapter = options.adapter;
    if (options.tracing !== undefined && (typeof options.tracing !== "object" || options.tracing === null || typeof options.tracing.enqueue !== "function")) {
      throw new InvalidArgumentError("tracing must be an object with an enqueue(jobs, store) method (see docket/otel)");
    }
    this.#tracing = options.tracing ?? null;
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.retry = resolveRetryPolicy(DEFAULT_RETRY_POLICY, options.retry);
    this.maxPayloadBytes = validateInteger(options.maxPayloadBytes ?? 1024 * 1024, "maxPayloadBytes", 2, 1 << 30);
    this.#payloadLimit = new PayloadLimit(this.adapter, this.maxPayloadBytes);
    this.defaultQueue = validateName(options.defaultQueue ?? "default", "defaultQueue");
    checkKeys(options.retention, ["finishedMs", "deadMs"], "retention");
    const keep = (value: number | null | undefined, fallback: number, what: string) =>
      value === null ? null : validateInteger(value ?? fallback, what, 0, MAX_DELAY_MS);
    this.retention = {
      finishedMs: keep(options.retention?.finishedMs, 7 * DAY_MS, "retention.finishedMs"),
      deadMs: keep(options.retention?.deadMs, 30 * DAY_MS, "retention.deadMs"),
    };
    checkKeys(options.idempotency, ["keyHoldAfterFinishMs"], "idempotency");
    const hold = options.idempotency?.keyHoldAfterFinishMs;
    this.keyHoldAfterFinishMs = hold === undefined || hold === null ? null : validateInteger(hold, "idempotency.keyHoldAfterFinishMs", 0, MAX_DELAY_MS);
    checkObject(options.tasks, "tasks");
    if (options.tasks !== undefined) {
      this.#tasks = new Map();
      for (const [name, task] of Object.entries(options.tasks) as [string, TaskOptions | undefined][]) {
        validateName(name, "task name");
        // undefined: registered without options; null and other non-objects are refused.
        const own = task === undefined ? {} : task;
        this.#validateTaskOptions(name, own);
        this.#tasks.set(name, own);
      }
    } else {
      this.#tasks = null;
    }
    this.schedules = new Schedules({
      adapter: this.adapter,
      clock: { now: () => this.clock.now() },
      prepareJob: (item, now) => this.#newJob(item as EnqueueItem<T>, now, ""),
      checkStorable: (payload) => this.#payloadLimit.check([payload]),
      announceScheduled: (job) => {
        if (job.state === "ready") this.#tellEnqueued(new Set([job.queue]), false);
        if (this.#events.wants("enqueued")) this.#events.emit({ type: "enqueued", at: this.clock.now(), job });
      },
    });
  }

  /** Brings the database schema up to date. Safe to call from every process at start-up. */
  migrate(): Promise<{ applied: number[]; version: number }> {
    return this.adapter.migrate();
  }

  /**
   * Validates and stores one job. Returns it as stored, with `created`. With
   * an `idempotencyKey` that a job holds, nothing is stored and the holder is
   * returned with `created: false` (see EnqueueOptions.idempotencyKey).
   */
  async enqueue<K extends keyof T & string>(task: K, payload: T[K], options?: EnqueueOptions & InTransaction): Promise<EnqueuedJob<T[K]>> {
    checkObject(options, "options");
    const { transaction, ...jobOptions } = options ?? {};
    const [job] = await this.#enqueue([{ task, payload, options: jobOptions }], transaction, "");
    return job as EnqueuedJob<T[K]>;
  }

  /**
   * Validates every item, then stores all of them in ONE transaction: either
   * every job is stored or none is (and nothing is when any item is invalid).
   * An item whose idempotency key is held (also by an earlier item of the
   * same call) gets the holder, with `created: false`. An item whose key a
   * job of another task holds (or an earlier item of another task) refuses
   * the whole call with IdempotencyConflictError: nothing is stored.
   */
  async enqueueMany(items: readonly EnqueueItem<T>[], options: InTransaction = {}): Promise<EnqueuedJob<T[keyof T]>[]> {
    if (!Array.isArray(items)) throw new InvalidArgumentError(`enqueueMany takes an array of items, got ${shown(items)}`);
    checkKeys(options, ["transaction"], "enqueueMany(items, options)");
    return this.#enqueue(items, options.transaction, "items");
  }

  /** Validates `items` (named `${label}[i]` in messages; "": the one job of `enqueue`), then stores them (see enqueueMany). */
  async #enqueue(items: readonly EnqueueItem<T>[], transaction: object | undefined, label: string): Promise<EnqueuedJob<T[keyof T]>[]> {
    if (transaction !== undefined && (typeof transaction !== "object" || transaction === null)) {
      throw new InvalidArgumentError(`transaction must be the caller's open transaction (an object), got ${shown(transaction)}`);
    }
    const now = this.clock.now();
    const jobs = items.map((item, i) => this.#newJob(item, now, label === "" ? "" : `${label}[${i}].`));
    await this.#payloadLimit.check(jobs.map((j) => j.payload), transaction);
    const hold = this.keyHoldAfterFinishMs;
    const store = (traceContext: string | null) =>
      this.adapter.enqueue({
        jobs: traceContext === null ? jobs : jobs.map((j) => ({ ...j, traceContext })),
        now,
        ...(hold === null ? {} : { keysReleasedBefore: now - hold }),
        ...(transaction === undefined ? {} : { transaction }),
      });
    const records = this.#tracing === null ? await store(null) : await this.#tracing.enqueue(jobs, store);
    // In the caller's transaction the jobs exist only once it commits, which docket cannot see: no local wake-up
    // (workers find them at their next poll; on PostgreSQL the NOTIFY sent in the transaction wakes them at commit).
    const ready = new Set(records.filter((r) => r.created && r.state === "ready").map((r) => r.queue));
    if (ready.size > 0 && transaction === undefined) this.#tellEnqueued(ready, false);
    if (transaction === undefined) this.#publishJobs("enqueued", records.filter((r) => r.created));
    return records.map((r) => ({ ...toJob<T[keyof T]>(r), created: r.created }));
  }

  /**
   * Resolves with the job once it is finished (succeeded, with its `result`;
   * dead; or cancelled), reading it every `pollMs` (default 100). Rejects
   * with NotFoundError when there is no such job (or it was purged),
   * WaitTimeoutError after `timeoutMs` (default: no limit), and with the
   * signal's reason when `signal` aborts. Waiting changes nothing.
   */
  async waitFor(id: number, options: { signal?: AbortSignal; timeoutMs?: number; pollMs?: number } = {}): Promise<Job> {
    validateId(id);
    checkKeys(options, ["signal", "timeoutMs", "pollMs"], "waitFor(options)");
    const pollMs = validateInteger(options.pollMs ?? 100, "pollMs", 1, 3_600_000);
    const timeoutMs = options.timeoutMs === undefined ? null : validateInteger(options.timeoutMs, "timeoutMs", 0, MAX_DELAY_MS);
    const { signal } = options;
    if (signal !== undefined && (typeof signal !== "object" || signal === null || typeof signal.aborted !== "boolean" || typeof signal.addEventListener !== "function")) {
      throw new InvalidArgumentError(`signal must be an AbortSignal, got ${shown(signal)}`);
    }
    const deadline = timeoutMs === null ? Number.POSITIVE_INFINITY : Date.now() + timeoutMs;
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const job = await this.get(id);
      if (!job) throw new NotFoundError(id, `no job ${id} to wait for`);
      if ((TERMINAL_STATES as readonly string[]).includes(job.state)) return job;
      const left = deadline - Date.now();
      if (left <= 0) throw new WaitTimeoutError(id, timeoutMs!);
      await pause(Math.min(pollMs, left), signal);
    }
  }

  /** The job that holds idempotency key `key` (see EnqueueOptions.idempotencyKey), or null. */
  async getByIdempotencyKey(key: string): Promise<Job | null> {
    const record = await this.adapter.getByIdempotencyKey({ key: validateName(key, "idempotencyKey") });
    return record ? toJob(record) : null;
  }

  /**
   * Calls `listener` with the queues of the ready jobs every committed
   * enqueue of THIS docket stored, so its workers start them at once instead
   * of at their next poll, and with `due` true the queue of each job a
   * replay made due (a claim must stage it). Returns an unsubscribe
   * function. For workers.
   */
  onEnqueued(listener: (queues: ReadonlySet<string>, due: boolean) => void): () => void {
    this.#enqueueListeners.add(listener);
    return () => void this.#enqueueListeners.delete(listener);
  }

  /** Calls `listener` with the id of every job this docket cancelled, once the cancel committed. For workers: a running handler's signal aborts at once. */
  onCancelled(listener: (id: number) => void): () => void {
    this.#cancelListeners.add(listener);
    return () => void this.#cancelListeners.delete(listener);
  }

  /**
   * Calls `listener` with every event of `type` ("*": of every type) this
   * process reports: the transitions this docket and its workers won, and
   * the errors its workers survived (see DocketEvent). Returns an
   * unsubscribe function. A listener runs synchronously and must not
   * throw (what it throws is ignored).
   */
  on<E extends DocketEventType>(type: E, listener: (event: EventOf<E>) => void): () => void;
  on(type: "*", listener: (event: DocketEvent) => void): () => void;
  on(type: DocketEventType | "*", listener: (event: never) => void): () => void {
    if (type !== "*" && !EVENT_TYPES.has(type)) throw new InvalidArgumentError(`unknown event type ${shown(type)}; known: *, ${[...EVENT_TYPES].join(", ")}`);
    if (typeof listener !== "function") throw new InvalidArgumentError("on(type, listener): listener must be a function");
    return this.#events.on(type, listener as (event: DocketEvent) => void);
  }

  /** @internal Reports an event a worker of this docket won or survived (see `on`). */
  publish(event: DocketEvent): void {
    this.#events.emit(event);
  }

  /** @internal Whether anything listens for `type`. */
  listens(type: DocketEventType): boolean {
    return this.#events.wants(type);
  }

  #publishJobs(type: "enqueued" | "cancelled" | "replayed", records: readonly JobRecord[]): void {
    if (records.length === 0 || !this.#events.wants(type)) return;
    const at = this.clock.now();
    for (const r of records) this.#events.emit({ type, at, job: toJob(r) });
  }

  #tellEnqueued(queues: ReadonlySet<string>, due: boolean): void {
    for (const listener of this.#enqueueListeners) {
      try {
        listener(queues, due);
      } catch {
        // A listener's failure must not fail the enqueue that committed.
      }
    }
  }

  async get(id: number): Promise<Job | null> {
    const record = await this.adapter.get({ id: validateId(id) });
    return record ? toJob(record) : null;
  }

  async list(options: ListOptions = {}): Promise<Job[]> {
    checkKeys(options, LIST_OPTION_KEYS, "list(options)");
    const limit = validateInteger(options.limit ?? 100, "limit", 1, 10_000);
    if (options.state !== undefined && !isJobState(options.state)) {
      throw new InvalidArgumentError(`state must be one of ${JOB_STATES.join(", ")}, got ${shown(options.state)}`);
    }
    const records = await this.adapter.list({
      limit,
      state: options.state,
      queue: options.queue === undefined ? undefined : validateName(options.queue, "queue"),
      task: options.task === undefined ? undefined : validateName(options.task, "task"),
      afterId: options.afterId === undefined ? undefined : validateInteger(options.afterId, "afterId", 0, Number.MAX_SAFE_INTEGER),
    });
    return records.map((r) => toJob(r));
  }

  /**
   * Cancels a job that has not finished. A running job's lease is revoked at
   * once: its worker's heartbeat, completion or failure is rejected and its
   * handler's signal is aborted at the next heartbeat. Throws NotFoundError
   * for an unknown id and InvalidStateError for a finished job.
   */
  async cancel(id: number): Promise<Job> {
    validateId(id);
    const record = await this.adapter.cancel({ id, now: this.clock.now() });
    if (record) {
      this.#publishJobs("cancelled", [record]);
      for (const listener of this.#cancelListeners) {
        try {
          listener(record.id);
        } catch {
          // A listener's failure must not fail the cancel that committed.
        }
      }
      return toJob(record);
    }
    const current = await this.adapter.get({ id });
    if (!current) throw new NotFoundError(id);
    throw new InvalidStateError(id, current.state, "cancel");
  }

  /**
   * One sweep: every running job whose lease expired counts as a failed
   * attempt and is scheduled for retry or buried. Safe to run in every
   * process at once: each job is moved by exactly one sweeper.
   */
  async reclaimExpired(limit = 1000): Promise<ReclaimResult> {
    const result: ReclaimResult = { retried: 0, dead: 0 };
    const now = this.clock.now();
    const expired = await this.adapter.listExpired({ now, limit });
    for (const job of expired) {
      const plan = this.planFailure(job, now);
      const moved = await this.adapter.expire({
        id: job.id,
        leaseToken: job.leaseToken!,
        now,
        concurrencyKey: job.concurrencyKey,
        error: `lease expired at ${new Date(job.leaseExpiresAt!).toISOString()} (worker stopped heartbeating)`,
        retryAt: plan.kind === "retry" ? plan.runAt : null,
      });
      if (!moved) continue;
      result[moved.state === "dead" ? "dead" : "retried"]++;
      if (this.#events.wants("reclaimed")) this.#events.emit({ type: "reclaimed", at: this.clock.now(), job: toJob(moved), error: moved.lastError ?? "" });
    }
    return result;
  }

  /**
   * One retention pass: deletes up to `limit` succeeded or cancelled jobs
   * finished more than `retention.finishedMs` ago, and up to `limit` dead
   * ones finished more than `retention.deadMs` ago, oldest first. Safe to run
   * in every process at once; workers run it about once a minute.
   */
  async purgeFinished(options: { limit?: number } = {}): Promise<{ deleted: number }> {
    checkKeys(options, ["limit"], "purgeFinished(options)");
    const limit = validateInteger(options.limit ?? 1000, "limit", 1, 100_000);
    const now = this.clock.now();
    let deleted = 0;
    const { finishedMs, deadMs } = this.retention;
    if (finishedMs !== null) deleted += await this.adapter.purge({ states: ["succeeded", "cancelled"], finishedBefore: now - finishedMs, limit });
    if (deadMs !== null) deleted += await this.adapter.purge({ states: ["dead"], finishedBefore: now - deadMs, limit });
    return { deleted };
  }

  /**
   * The keys maintenance pass (defence in depth): promotes the blocked jobs
   * of up to `limit` (default 100) keys that hold fewer jobs than their limit
   * allows. docket's own writes never leave such a key (the write that frees
   * a slot promotes in its transaction); a manual edit or a bug could.
   * Returns the keys it repaired. Safe in every process at once; workers run
   * it about once a minute and report each repair as a `keyRepaired` event.
   */
  async repairKeys(options: { limit?: number } = {}): Promise<{ repaired: string[] }> {
    checkKeys(options, ["limit"], "repairKeys(options)");
    const limit = validateInteger(options.limit ?? 100, "limit", 1, 100_000);
    return { repaired: await this.adapter.repairKeys({ now: this.clock.now(), limit }) };
  }

  /** The dead-letter list: jobs that used up their attempts. */
  readonly deadLetters = {
    /** Dead jobs, oldest id first. */
    list: (options: Omit<ListOptions, "state"> = {}): Promise<Job[]> => {
      checkKeys(options, LIST_OPTION_KEYS.filter((k) => k !== "state"), "deadLetters.list(options)");
      return this.list({ ...options, state: "dead" });
    },
    /**
     * Puts a dead job back to ready with a fresh attempt budget. Of several
     * concurrent replays of one job exactly one succeeds; the others get
     * NotFoundError (no such dead job). A job that is not dead: NotFoundError.
     */
    replay: async (id: number): Promise<Job> => {
      validateId(id);
      const record = await this.adapter.replay({ id, now: this.clock.now() });
      if (!record) throw new NotFoundError(id, `no dead job ${id} to replay`);
      this.#tellEnqueued(new Set([record.queue]), true);
      this.#publishJobs("replayed", [record]);
      return toJob(record);
    },
    /**
     * Replays every dead job that died before this call (of `queue` and
     * `task` when given; at most `limit`), in transactions of up to
     * DEAD_LETTER_BATCH jobs, skipping jobs another replay or purge holds
     * (they are that call's). Concurrent calls replay each job once: the
     * counts they return add up to the jobs replayed. A job that dies again
     * during the call is not replayed again by it. Returns how many it replayed.
     */
    replayAll: async (options: DeadLetterFilter & { limit?: number } = {}): Promise<{ replayed: number }> => {
      checkKeys(options, ["queue", "task", "limit"], "deadLetters.replayAll(options)");
      const filter = deadLetterFilter(options);
      const limit = options.limit === undefined ? Number.MAX_SAFE_INTEGER : validateInteger(options.limit, "limit", 1, Number.MAX_SAFE_INTEGER);
      const diedBefore = this.clock.now();
      let replayed = 0;
      while (replayed < limit) {
        const batch = Math.min(DEAD_LETTER_BATCH, limit - replayed);
        const records = await this.adapter.replayDead({ ...filter, diedBefore, limit: batch, now: this.clock.now() });
        replayed += records.length;
        if (records.length > 0) this.#tellEnqueued(new Set(records.map((r) => r.queue)), true);
        this.#publishJobs("replayed", records);
        if (records.length < batch) break;
      }
      return { replayed };
    },
    /**
     * Deletes dead jobs that died at least `olderThanMs` ago (default 0: all;
     * of `queue` and `task` when given; at most `limit`), in transactions of
     * up to DEAD_LETTER_BATCH jobs, skipping jobs another replay or purge
     * holds. Returns how many it deleted.
     */
    purge: async (options: DeadLetterFilter & { olderThanMs?: number; limit?: number } = {}): Promise<{ deleted: number }> => {
      checkKeys(options, ["queue", "task", "olderThanMs", "limit"], "deadLetters.purge(options)");
      const filter = deadLetterFilter(options);
      const limit = options.limit === undefined ? Number.MAX_SAFE_INTEGER : validateInteger(options.limit, "limit", 1, Number.MAX_SAFE_INTEGER);
      const finishedBefore = this.clock.now() - validateDuration(options.olderThanMs ?? 0, "olderThanMs");
      let deleted = 0;
      while (deleted < limit) {
        const batch = Math.min(DEAD_LETTER_BATCH, limit - deleted);
        const n = await this.adapter.purge({ ...filter, states: ["dead"], finishedBefore, limit: batch });
        deleted += n;
        if (n < batch) break;
      }
      return { deleted };
    },
  };

  /**
   * Pauses a queue for every worker, durably: once this returns, no claim
   * takes a job from it until `resumeQueue`. Running jobs finish normally.
   */
  async pauseQueue(queue: string): Promise<QueueControl> {
    return this.adapter.setQueueControl({ queue: validateName(queue, "queue"), paused: true });
  }

  async resumeQueue(queue: string): Promise<QueueControl> {
    return this.adapter.setQueueControl({ queue: validateName(queue, "queue"), paused: false });
  }

  /**
   * At most `cap` jobs of this queue run at once across all workers and
   * processes (null removes the cap). Stored in the database; takes effect at
   * the next claim. Lowering it below the running count preempts nothing.
   */
  async setQueueCap(queue: string, cap: number | null): Promise<QueueControl> {
    return this.adapter.setQueueControl({ queue: validateName(queue, "queue"), maxRunning: validateCap(cap, "cap") });
  }

  /** At most `cap` jobs of this task run at once across all workers (null removes the cap). */
  async setTaskCap(task: string, cap: number | null): Promise<TaskControl> {
    return this.adapter.setTaskControl({ task: validateName(task, "task"), maxRunning: validateCap(cap, "cap") });
  }

  /** Every stored queue and task control. */
  listControls(): Promise<{ queues: QueueControl[]; tasks: TaskControl[] }> {
    return this.adapter.listControls();
  }

  /**
   * What an operator wants to see, read in a fixed number of queries
   * (fourteen, the controls included), each an index range bounded by the
   * live jobs, the dead ones and those finished within the window, never
   * by the history kept: per queue and task the jobs in each state
   * (succeeded and cancelled: finished within the window), the age of the
   * oldest ready job, pause and caps; running jobs with their worker and
   * lease expiry; keys with slots in use and blocked jobs; jobs finished
   * per minute over the last 15 (see StatsOptions). Reads only.
   */
  async stats(options: StatsOptions = {}): Promise<DocketStats> {
    checkKeys(options, ["windowMs", "bucketMs", "runningLimit", "keysLimit"], "stats(options)");
    const bucketMs = validateInteger(options.bucketMs ?? 60_000, "bucketMs", 1_000, DAY_MS);
    const windowMs = validateInteger(options.windowMs ?? 15 * 60_000, "windowMs", bucketMs, 31 * DAY_MS);
    if (windowMs / bucketMs > 1_000) throw new InvalidArgumentError(`windowMs / bucketMs must be at most 1000 buckets, got ${Math.ceil(windowMs / bucketMs)}`);
    const runningLimit = validateInteger(options.runningLimit ?? 100, "runningLimit", 1, 10_000);
    const keysLimit = validateInteger(options.keysLimit ?? 100, "keysLimit", 1, 10_000);
    const now = this.clock.now();
    const since = now - windowMs;
    const [stored, controls] = await Promise.all([this.adapter.stats({ since, bucketMs, runningLimit, keysLimit }), this.adapter.listControls()]);
    return shapeStats(stored, controls, { now, since, windowMs, bucketMs });
  }

  /**
   * Recurring jobs: `put(name, { cron, timezone, task, payload, options })`,
   * `remove(name)`, `list()`, and `runDue()` (one pass). Run `scheduler()`
   * in one or many processes: each tick enqueues exactly one job.
   */
  readonly schedules: Schedules;

  /**
   * Fires due schedule ticks every `intervalMs` (default 1000) until
   * `stop()`. Safe to run in every process: a tick fires once in total.
   * Errors (a lost connection) go to `onError` and the next pass retries.
   */
  scheduler(options: { intervalMs?: number; onError?: (error: Error) => void } = {}): Scheduler {
    return new Scheduler(this.schedules, options);
  }

  /**
   * The dashboard: a web-standard `(Request) => Promise<Response>` handler
   * (see DashboardOptions: basePath, authorize, readOnly).
   */
  dashboard(options: DashboardOptions = {}): DashboardHandler {
    return dashboard(this, options);
  }

  /** Each registered task's queue (`defaultQueue` for one registered without a queue); empty without a `tasks` registry. */
  taskQueues(): Map<string, string> {
    return new Map([...(this.#tasks ?? [])].map(([task, options]) => [task, options.queue ?? this.defaultQueue]));
  }

  /** A worker that runs this docket's jobs. Call `start()` on it. */
  worker(options: WorkerOptions<T>): Worker<T> {
    checkObject(options, "worker(options)");
    return new Worker(this.#workerHost(), options);
  }

  /** What a worker of this docket sees of it. */
  #workerHost(): WorkerHost {
    return {
      adapter: this.adapter,
      clock: this.clock,
      random: this.random,
      defaultQueue: this.defaultQueue,
      taskQueues: () => this.taskQueues(),
      payloadLimit: () => this.payloadLimit().catch(() => this.maxPayloadBytes),
      planFailure: (job, now) => this.planFailure(job, now),
      listens: (type) => this.listens(type),
      publish: (event) => this.publish(event),
      onEnqueued: (listener) => this.onEnqueued(listener),
      onCancelled: (listener) => this.onCancelled(listener),
      reclaimExpired: () => this.reclaimExpired(),
      maintain: async (failed) => {
        try {
          await this.purgeFinished();
        } catch (error) {
          failed(error as Error, "purge");
        }
        try {
          return (await this.repairKeys()).repaired;
        } catch (error) {
          failed(error as Error, "repair");
          return [];
        }
      },
    };
  }

  /**
   * The largest payload, result or progress value stored, in UTF-8 bytes of
   * its JSON: `maxPayloadBytes`, or the database's own limit where the
   * adapter reports a lower one (MariaDB/MySQL: what fits in
   * `max_allowed_packet`), read once.
   */
  payloadLimit(): Promise<number> {
    return this.#payloadLimit.bytes();
  }

  /** Closes the adapter (and the connections it opened). */
  close(): Promise<void> {
    return this.adapter.close();
  }

  /** The retry policy that applies to `job`: docket default, then task, then the job's own overrides. */
  retryPolicyFor(job: JobRecord): RetryPolicy {
    const task = this.#tasks?.get(job.task);
    // Only known fields: a row written by an older docket may hold others.
    const stored = job.backoff === null ? {} : (JSON.parse(job.backoff) as Record<string, unknown>);
    const own = Object.fromEntries(Object.entries(stored).filter(([k]) => (BACKOFF_KEYS as readonly string[]).includes(k))) as Partial<RetryPolicy>;
    return resolveRetryPolicy(this.retry, task?.backoff, own, { maxAttempts: job.maxAttempts });
  }

  /** Pure policy: where a failed attempt of `job` goes, at `now`. */
  planFailure(job: JobRecord, now: number) {
    return planFailure(job.attempt, job.maxAttempts, now, this.retryPolicyFor(job), this.random);
  }

  #newJob(item: EnqueueItem<T>, now: number, at: string): NewJob {
    const label = at === "" ? "item" : at.slice(0, -1);
    if (item === undefined) throw new InvalidArgumentError(`${label} must be an object, got undefined`);
    // enqueue's item ("") is its own; an enqueueMany item is the caller's, with no key but these three.
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
    const queue = validateName(o.queue ?? defaults.queue ?? this.defaultQueue, `${at}queue`);
    const priority = validateInteger(o.priority ?? defaults.priority ?? 0, `${at}priority`, MIN_PRIORITY, MAX_PRIORITY);
    const maxAttempts = validateInteger(o.maxAttempts ?? defaults.maxAttempts ?? this.retry.maxAttempts, `${at}maxAttempts`, 1, MAX_ATTEMPTS_LIMIT);
    let backoff: string | null = null;
    if (o.backoff !== undefined) {
      checkKeys(o.backoff, BACKOFF_KEYS, `${at}options.backoff`);
      validateRetryPolicy({ ...this.retry, ...o.backoff, maxAttempts });
      backoff = JSON.stringify(o.backoff);
    }
    const payload = serializePayload(item.payload, this.maxPayloadBytes);
    const concurrency = this.#concurrencyFor(item, defaults, at);
    const timeout = o.timeoutMs ?? defaults.timeoutMs;
    const timeoutMs = timeout === undefined ? null : validateInteger(timeout, `${at}timeoutMs`, 1, MAX_TIMEOUT_MS);
    const idempotencyKey = o.idempotencyKey === undefined ? null : validateName(o.idempotencyKey, `${at}idempotencyKey`);
    return { task, queue, payload, state: runAt > now ? "scheduled" : "ready", priority, runAt, maxAttempts, backoff, concurrency, timeoutMs, idempotencyKey };
  }

  #concurrencyFor(item: EnqueueItem<T>, defaults: TaskOptions, at: string): ConcurrencySpec | null {
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

  #validateTaskOptions(name: string, o: TaskOptions): void {
    const at = `tasks.${name}.`;
    checkKeys(o, TASK_OPTION_KEYS, `tasks.${name}`);
    if (o.backoff !== undefined) checkKeys(o.backoff, BACKOFF_KEYS, `${at}backoff`);
    if (o.queue !== undefined) validateName(o.queue, `${at}queue`);
    if (o.priority !== undefined) validateInteger(o.priority, `${at}priority`, MIN_PRIORITY, MAX_PRIORITY);
    if (o.maxAttempts !== undefined) validateInteger(o.maxAttempts, `${at}maxAttempts`, 1, MAX_ATTEMPTS_LIMIT);
    if (o.backoff !== undefined) validateRetryPolicy({ ...this.retry, ...o.backoff });
    if (o.timeoutMs !== undefined) validateInteger(o.timeoutMs, `${at}timeoutMs`, 1, MAX_TIMEOUT_MS);
    if (o.concurrency !== undefined) {
      const key = typeof o.concurrency.key === "function" ? "computed" : o.concurrency.key;
      validateConcurrency({ ...o.concurrency, key }, at);
    }
  }
}

const DOCKET_OPTION_KEYS = ["adapter", "tasks", "retry", "maxPayloadBytes", "defaultQueue", "clock", "random", "retention", "idempotency", "tracing"] as const;
const DAY_MS = 24 * 3600_000;
const TASK_OPTION_KEYS = ["queue", "priority", "maxAttempts", "backoff", "concurrency", "timeoutMs"] as const;
const ITEM_KEYS = ["task", "payload", "options"] as const;
const ENQUEUE_OPTION_KEYS = ["queue", "priority", "runAt", "delay", "maxAttempts", "backoff", "concurrency", "timeoutMs", "idempotencyKey"] as const;
const BACKOFF_KEYS = RETRY_POLICY_KEYS.filter((k) => k !== "maxAttempts");
const LIST_OPTION_KEYS = ["state", "queue", "task", "afterId", "limit"] as const;

/** Dead jobs per transaction of `deadLetters.replayAll` and `deadLetters.purge`. */
const DEAD_LETTER_BATCH = 500;

/** Which dead jobs a bulk dead-letter operation takes: all, or those of one queue and/or task. */
export interface DeadLetterFilter {
  queue?: string;
  task?: string;
}

function deadLetterFilter(options: DeadLetterFilter): DeadLetterFilter {
  const filter: DeadLetterFilter = {};
  if (options.queue !== undefined) filter.queue = validateName(options.queue, "queue");
  if (options.task !== undefined) filter.task = validateName(options.task, "task");
  return filter;
}

function validateId(id: unknown): number {
  return validateInteger(id, "id", 1, Number.MAX_SAFE_INTEGER);
}

/** Sleeps `ms`, or less when `signal` aborts first (the caller checks `signal.aborted` after). */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
