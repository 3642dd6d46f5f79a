/**
 * The public API: `Docket`, the queue an application enqueues to, reads,
 * controls and runs workers of. It checks input and delegates: job building
 * to tasks.ts, storing to enqueue.ts, maintenance to sweeper.ts, dead
 * letters to dead-letters.ts, schedules to schedules.ts, the snapshot to
 * stats.ts; failure plans are core policy (core/retry.ts).
 */
import type { DocketAdapter, QueueControl, StoreHealth, TaskControl } from "../core/adapter.ts";
import { validateRateLimit, type RateLimit } from "../core/rate-limit.ts";
import type { Clock } from "../core/clock.ts";
import { validateCap } from "../core/concurrency.ts";
import { InvalidArgumentError, InvalidStateError, NotFoundError } from "../core/errors.ts";
import { EVENT_TYPES, isEventType, type DocketEvent, type DocketEventType, type EventOf } from "../core/events.ts";
import { toJob, type Job, type JobRecord, type TaskJob, type TaskMap } from "../core/job.ts";
import { jobRetryPolicy, planJobFailure, type FailurePlan, type RetryPolicy } from "../core/retry.ts";
import { shown } from "../core/shown.ts";
import { checkKeys, checkObject, validateName } from "../core/validate.ts";
import { Worker, type WorkerOptions } from "../worker/index.ts";
import type { WorkerHost } from "../worker/host.ts";
import { dashboard, type DashboardHandler, type DashboardOptions } from "../dashboard/index.ts";
import { LocalBus } from "./bus.ts";
import { deadLetters, type DeadLetters } from "./dead-letters.ts";
import { BulkActions } from "./bulk.ts";
import { DebounceLanes } from "./debounce-lanes.ts";
import { cancelJob, deleteJob, runJobNow } from "./job-actions.ts";
import { workerHost } from "./worker-host.ts";
import { enqueueItems, type EnqueuedJob, type EnqueueHost, type InTransaction } from "./enqueue.ts";
import { resolveOptions, type DocketOptions } from "./options.ts";
import { PayloadLimit } from "./payload-limit.ts";
import { docketSchedules, Scheduler, type Schedules } from "./schedules.ts";
import { readStats, type DocketStats, type StatsOptions } from "./stats.ts";
import { purgeFinished, reclaimExpired, repairKeys, type ReclaimResult, type SweeperHost } from "./sweeper.ts";
import { TaskRegistry, type EnqueueItem, type EnqueueOptions, type TaskOptions } from "./tasks.ts";
import { dependenciesOf, getByIdempotencyKey, getJob, listJobs, listWorkers, waitFor, type ListOptions, type WaitOptions, type WorkerInfo } from "./reads.ts";

export type { TaskMap } from "../core/job.ts";
export type { BackoffOptions, EnqueueItem, EnqueueOptions, TaskConcurrency, TaskOptions } from "./tasks.ts";
export type { EnqueuedJob, EnqueueTracing, InTransaction } from "./enqueue.ts";
export type { DocketOptions, RetentionOptions } from "./options.ts";
export type { ReclaimResult } from "./sweeper.ts";
export type { DeadLetterFilter, DeadLetterListOptions, DeadLetters } from "./dead-letters.ts";
export type { BulkAction, BulkActions, BulkFilter } from "./bulk.ts";
export type { ListOptions, WaitOptions, WorkerInfo } from "./reads.ts";

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
  readonly #tasks: TaskRegistry;
  readonly #bus: LocalBus;
  readonly #payloadLimit: PayloadLimit;
  readonly #enqueueHost: EnqueueHost;
  readonly #sweeperHost: SweeperHost;

  constructor(options: DocketOptions<T>) {
    const o = resolveOptions(options);
    this.adapter = o.adapter;
    this.clock = o.clock;
    this.random = o.random;
    this.retry = o.retry;
    this.maxPayloadBytes = o.maxPayloadBytes;
    this.defaultQueue = o.defaultQueue;
    this.retention = o.retention;
    this.keyHoldAfterFinishMs = o.keyHoldAfterFinishMs;
    this.#payloadLimit = new PayloadLimit(this.adapter, this.maxPayloadBytes);
    this.#tasks = new TaskRegistry(options.tasks as Record<string, TaskOptions | undefined> | undefined, this);
    const bus = (this.#bus = new LocalBus(this.clock));
    const { adapter, clock } = this;
    this.#enqueueHost = { adapter, clock, bus, tasks: this.#tasks, payloadLimit: this.#payloadLimit, tracing: o.tracing, keyHoldAfterFinishMs: this.keyHoldAfterFinishMs, debounceLanes: new DebounceLanes((p) => adapter.enqueue(p)) };
    this.#sweeperHost = { adapter, clock, bus, retention: this.retention, planFailure: (job, now) => this.planFailure(job, now) };
    this.deadLetters = deadLetters({ adapter, clock, bus, list: (options) => this.list(options) });
    this.schedules = docketSchedules<T>(this.#enqueueHost);
    this.bulk = new BulkActions({ adapter, clock, bus, replay: (id) => this.deadLetters.replay(id) });
  }

  /** Brings the database schema up to date. Safe to call from every process at start-up. */
  migrate(): Promise<{ applied: number[]; version: number }> {
    return this.adapter.migrate();
  }

  /** Validates and stores one job; returns it as stored, with `created` (false: an idempotency key's holder, see EnqueueOptions). */
  async enqueue<K extends keyof T & string>(task: K, payload: T[K], options?: EnqueueOptions & InTransaction): Promise<EnqueuedJob<T[K]>> {
    checkObject(options, "options");
    const { transaction, ...jobOptions } = options ?? {};
    const [job] = await enqueueItems<T>(this.#enqueueHost, [{ task, payload, options: jobOptions }], transaction, "");
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
    return enqueueItems(this.#enqueueHost, items, options.transaction, "items");
  }

  /**
   * Resolves with the job once it is finished (succeeded, with its `result`; dead; or cancelled), reading it
   * every `pollMs` (default 100). Rejects with NotFoundError when there is no such job (or it was purged),
   * WaitTimeoutError after `timeoutMs` (default: no limit), and with the signal's reason when `signal` aborts. Reads only.
   */
  waitFor(id: number, options: WaitOptions = {}): Promise<TaskJob<T>> {
    return waitFor((id) => this.get(id), id, options);
  }

  /** The job that holds idempotency key `key` (see EnqueueOptions.idempotencyKey), or null. */
  getByIdempotencyKey(key: string): Promise<TaskJob<T> | null> {
    return getByIdempotencyKey(this.adapter, key) as Promise<TaskJob<T> | null>;
  }

  /**
   * Calls `listener` with the queues of the ready jobs every committed
   * enqueue of THIS docket stored, so its workers start them at once instead
   * of at their next poll, and with `due` true the queue of each job a
   * replay made due (a claim must stage it). Returns an unsubscribe
   * function. For workers.
   */
  onEnqueued(listener: (queues: ReadonlySet<string> | null, due: boolean) => void): () => void {
    return this.#bus.onEnqueued(listener);
  }

  /** Calls `listener` with the id of every job this docket cancelled, once the cancel committed. For workers: a running handler's signal aborts at once. */
  onCancelled(listener: (id: number) => void): () => void {
    return this.#bus.onCancelled(listener);
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
    if (type !== "*" && !isEventType(type)) throw new InvalidArgumentError(`unknown event type ${shown(type)}; known: *, ${EVENT_TYPES.join(", ")}`);
    if (typeof listener !== "function") throw new InvalidArgumentError("on(type, listener): listener must be a function");
    return this.#bus.events.on(type, listener as (event: DocketEvent) => void);
  }

  /** @internal Reports an event a worker of this docket won or survived (see `on`). */
  publish(event: DocketEvent): void {
    this.#bus.events.emit(event);
  }

  /** @internal Whether anything listens for `type`. */
  listens(type: DocketEventType): boolean {
    return this.#bus.events.wants(type);
  }

  get(id: number): Promise<TaskJob<T> | null> {
    return getJob(this.adapter, id) as Promise<TaskJob<T> | null>;
  }

  /** Job `id`'s parents and children (see EnqueueOptions.after), in id order; empty for a job without dependencies. */
  dependencies(id: number): Promise<{ parents: Job[]; children: Job[] }> {
    return dependenciesOf(this.adapter, id);
  }

  list(options: ListOptions<T> = {}): Promise<Job[]> {
    return listJobs(this.adapter, options);
  }

  /**
   * Cancels a job that has not finished. A running job's lease is revoked at once: its worker's heartbeat,
   * completion or failure is rejected, and its handler's signal aborts at once in a worker of this docket
   * (in another process, within that worker's lease check, at most min(pollMs, 1 s)).
   * NotFoundError for an unknown id, InvalidStateError for a finished job.
   */
  cancel(id: number): Promise<Job> {
    return cancelJob(this.#sweeperHost, id);
  }

  /** Makes a scheduled job (delayed, or in a retry's backoff) due now, attempts kept, controls still applied; NotFoundError, or InvalidStateError for any other state (a dead job: `deadLetters.replay`). */
  runNow(id: number): Promise<Job> {
    return runJobNow(this.#sweeperHost, id);
  }

  /** Deletes a finished job (succeeded, cancelled or dead) and its dependency edges; NotFoundError, or InvalidStateError for a live job (cancel it first). */
  deleteJob(id: number): Promise<void> {
    return deleteJob(this.#sweeperHost, id);
  }

  /**
   * One sweep: every running job whose lease expired counts as a failed
   * attempt and is scheduled for retry or buried. Safe to run in every
   * process at once: each job is moved by exactly one sweeper.
   */
  reclaimExpired(limit = 1000): Promise<ReclaimResult> {
    return reclaimExpired(this.#sweeperHost, limit);
  }

  /**
   * One retention pass: deletes up to `limit` succeeded or cancelled jobs
   * finished more than `retention.finishedMs` ago, and up to `limit` dead
   * ones finished more than `retention.deadMs` ago, oldest first. Safe to run
   * in every process at once; workers run it about once a minute.
   */
  purgeFinished(options: { limit?: number } = {}): Promise<{ deleted: number }> {
    return purgeFinished(this.#sweeperHost, options);
  }

  /**
   * The keys maintenance pass (defence in depth): promotes the blocked jobs
   * of up to `limit` (default 100) keys that hold fewer jobs than their limit
   * allows. docket's own writes never leave such a key (the write that frees
   * a slot promotes in its transaction); a manual edit or a bug could.
   * Returns the keys it repaired. Safe in every process at once; workers run
   * it about once a minute and report each repair as a `keyRepaired` event.
   */
  repairKeys(options: { limit?: number } = {}): Promise<{ repaired: string[] }> {
    return repairKeys(this.#sweeperHost, options);
  }

  /** The dead-letter list: jobs that used up their attempts (see DeadLetters). */
  readonly deadLetters: DeadLetters;
  /** Actions on every job a filter selects: `count(filter)`, then `apply(action, filter, { limit })` (see BulkActions). */
  readonly bulk: BulkActions;

  /** Pauses a queue for every worker, durably: once this returns, no claim takes from it until `resumeQueue` and no job a worker prefetched from it starts (this docket's workers at once, others within about a second). */
  async pauseQueue(queue: string): Promise<QueueControl> {
    return this.#bus.afterPause(this.adapter.setQueueControl({ queue: validateName(queue, "queue"), paused: true }), queue, true);
  }

  async resumeQueue(queue: string): Promise<QueueControl> {
    return this.#bus.afterControl(this.#bus.afterPause(this.adapter.setQueueControl({ queue: validateName(queue, "queue"), paused: false }), queue, false), queue);
  }

  /** At most `cap` jobs of this queue run at once, cluster-wide (null: none); lowering it preempts nothing. */
  async setQueueCap(queue: string, cap: number | null): Promise<QueueControl> {
    return this.#bus.afterControl(this.adapter.setQueueControl({ queue: validateName(queue, "queue"), maxRunning: validateCap(cap, "cap") }), queue);
  }

  /** At most `cap` jobs of this task run at once across all workers (null removes the cap). */
  async setTaskCap(task: string, cap: number | null): Promise<TaskControl> {
    return this.#bus.afterControl(this.adapter.setTaskControl({ task: validateName(task, "task"), maxRunning: validateCap(cap, "cap") }), null);
  }

  /** At most `limit` jobs of this queue start in any window of `periodMs`, cluster-wide (null: none); docs/flow-control.md "Rate limits". */
  async setQueueRateLimit(queue: string, limit: RateLimit | null): Promise<QueueControl> {
    return this.#bus.afterControl(this.adapter.setQueueControl({ queue: validateName(queue, "queue"), rateLimit: validateRateLimit(limit, "rateLimit") }), queue);
  }

  /** As setQueueRateLimit, for every job of a task whatever its queue. */
  async setTaskRateLimit(task: string, limit: RateLimit | null): Promise<TaskControl> {
    return this.#bus.afterControl(this.adapter.setTaskControl({ task: validateName(task, "task"), rateLimit: validateRateLimit(limit, "rateLimit") }), null);
  }

  /** Every stored queue and task control. */
  listControls(): Promise<{ queues: QueueControl[]; tasks: TaskControl[] }> {
    return this.adapter.listControls();
  }

  /** What an operator wants to see (DocketStats), in a fixed number of queries (seventeen, the controls included), each an index range bounded by the live, dead and recently finished jobs, never by the history kept (StatsOptions). Reads only. */
  stats(options: StatsOptions = {}): Promise<DocketStats> {
    return readStats(this.adapter, this.clock, options);
  }

  /** What slows a queue from outside it, as the database sees it (StoreHealth: the oldest open transaction, dead row versions); null where the adapter has nothing to report (SQLite, in memory). Reads only. */
  health(): Promise<StoreHealth | null> {
    return this.adapter.health?.() ?? Promise.resolve(null);
  }

  /**
   * Recurring jobs: `put(name, { cron, timezone, task, payload, options })`,
   * `remove(name)`, `list()`, and `runDue()` (one pass). Run `scheduler()`
   * in one or many processes: each tick enqueues exactly one job.
   */
  readonly schedules: Schedules<T>;

  /**
   * Fires due schedule ticks every `intervalMs` (default 1000) until
   * `stop()`. Safe to run in every process: a tick fires once in total.
   * Errors go to `onError` (default: one `console.error` line each) and the
   * next pass retries; a schedule that cannot fire (say, its task no longer
   * registered here) does not hold back the others, and its name comes with its error.
   * `close()` stops it.
   */
  scheduler(options: { intervalMs?: number; onError?: (error: Error, schedule?: string) => void } = {}): Scheduler {
    return new Scheduler(this.schedules, options, this.#bus);
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
    return this.#tasks.queues();
  }

  /** A worker that runs this docket's jobs. Call `start()` on it. */
  worker(options: WorkerOptions<T>): Worker<T> {
    checkObject(options, "worker(options)");
    return new Worker(this.#workerHost(), options);
  }

  /** What a worker of this docket sees of it (src/worker/host.ts). */
  #workerHost(): WorkerHost {
    return workerHost(this, this.#payloadLimit, this.#sweeperHost, this.#bus);
  }

  /** The running workers, each with its host, pid, queues, concurrency, last heartbeat and jobs in hand; a crashed one drops out within its lease. Reads only. */
  workers(): Promise<WorkerInfo[]> {
    return listWorkers(this.adapter, this.clock);
  }

  /** The largest payload, result or progress value stored (UTF-8 bytes of its JSON): `maxPayloadBytes`, or the database's lower limit (read once). */
  payloadLimit(): Promise<number> {
    return this.#payloadLimit.bytes();
  }

  /** Stops this docket's running workers (as `worker.stop()`), then closes the adapter (and the connections it opened). Later calls are ClosedError. */
  close(): Promise<void> {
    return this.#bus.close().then(() => this.adapter.close());
  }

  /** The retry policy that applies to `job`: docket default, then task, then the job's own overrides (core/retry.ts jobRetryPolicy). */
  retryPolicyFor(job: JobRecord): RetryPolicy {
    return jobRetryPolicy(job, this.retry, this.#tasks.backoffOf(job.task));
  }

  /** Pure policy: where a failed attempt of `job` goes, at `now` (core/retry.ts planJobFailure under this docket's policy). */
  planFailure(job: JobRecord, now: number): FailurePlan {
    return planJobFailure(job, now, this.retry, this.#tasks.backoffOf(job.task), this.random);
  }
}
