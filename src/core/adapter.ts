import type { JobRecord } from "./job.ts";
import type { JobState } from "./states.ts";
import type { ConcurrencySpec } from "./concurrency.ts";
import type { RateLimit, RateLimitSpec } from "./rate-limit.ts";
import type { DebounceSpec } from "./debounce.ts";
import type { FairnessSpec } from "./fairness.ts";
import type { DocketError } from "./errors.ts";

/**
 * The storage contract. An adapter owns atomicity, never policy: the core
 * decides every target state and time, the adapter applies it with ONE
 * conditional write whose WHERE clause comes from the core TRANSITIONS table
 * (`id = ? AND state IN (legal predecessors) [AND fence]`).
 *
 * Conventions every method follows:
 * - a method with arguments takes one params object of a named `…Params`
 *   type; `now` (epoch ms) is passed in, the adapter never reads a clock;
 * - each write's comment names the states it moves a job from and to (the
 *   core TRANSITIONS table is the reference); a write that loses a race
 *   (zero rows matched: the job is in another state, or another lease holds
 *   it) returns `null` or leaves the job out of the returned list, and has
 *   no other effect;
 * - native driver errors are thrown as `AdapterError` with the native error as
 *   `cause`; nothing else escapes.
 *
 * These are the calls docket makes: the worker writes outcomes with
 * `settle` and heartbeats with `extendLeases`, so an adapter implements no
 * single-job variant of either.
 */
export interface DocketAdapter {
  /** A short name for logs and test titles ("sqlite", "postgres", "mysql"). */
  readonly name: string;

  /**
   * True when statements run on the calling thread (an embedded database
   * such as SQLite): while one runs, nothing else in the process does, so
   * the worker does not overlap a claim with the write of finished jobs'
   * outcomes (it would only lengthen the time the event loop is held).
   * Absent means false.
   */
  readonly blocking?: boolean;

  /**
   * Optional. How concurrent calls meet in the store (see
   * AdapterCapabilities); absent, or a member absent, means that member's
   * documented default. Whether ready notices exist is `onReady`'s presence.
   */
  readonly capabilities?: AdapterCapabilities;

  /**
   * Brings the schema to the newest version this code knows. Idempotent, and
   * safe when several processes run it at once (serialized by a database
   * lock). Throws SchemaTooNewError if the database is newer than this code.
   * Returns the versions it applied (empty when already current). On a
   * current schema it only reads: no DDL and no lock, so a role without DDL
   * rights may call it.
   */
  migrate(): Promise<MigrateResult>;

  /**
   * Inserts all jobs in ONE transaction: all are stored or none is. Returns
   * the stored records in input order. A job whose idempotency key is held
   * (by a job stored earlier, by a concurrent call that committed, or by an
   * earlier job of this batch) is not inserted: its record is the holder's,
   * with `created: false`. Concurrent calls with one key never fail on the
   * key's uniqueness: one creates the job, the others get it. When the
   * holder's task is not the job's, the whole call is refused with
   * IdempotencyConflictError and leaves no job of it, also in the caller's
   * transaction (`transaction`) should that commit anyway. A job with a
   * debounce key merges into its key's pending job when there is one (see
   * NewJob.debounce): that job's record is returned, with `created: false`.
   */
  enqueue(params: EnqueueParams): Promise<EnqueuedRecord[]>;

  /**
   * Optional. The largest JSON text (UTF-8 bytes) the database stores as one
   * payload, result or progress value, or null when it has no limit of its
   * own; read once. The core refuses a larger value (PayloadTooLargeError)
   * before writing. Runs in `transaction` when one is given (it may hold the
   * only connection), else on the adapter's own connections.
   */
  payloadLimit?(params: PayloadLimitParams): Promise<number | null>;

  /**
   * The job that holds idempotency key `key` (in any state, until its key
   * is released or it is purged), or null when no job holds it. Read only.
   */
  getByIdempotencyKey(params: GetByIdempotencyKeyParams): Promise<JobRecord | null>;

  /**
   * The ids of job `id`'s parents and children (see NewJob.after), each in
   * id order; both empty for a job without dependencies or one not stored.
   */
  dependencies(params: { id: number }): Promise<Dependencies>;

  /**
   * First admits due scheduled jobs (scheduled → ready, or, when their
   * concurrency key is full, → blocked or → cancelled by the job's stored
   * `onConflict`; see `admit`). Then, in ONE transaction, moves up to
   * `limit` ready jobs of the given queues (and of `tasks`, when given) to
   * running, ordered by priority (smaller first), then run_at, then id,
   * skipping paused queues and never exceeding a queue's or a task's cap (the
   * cap check, counting only jobs already running, and the claim are
   * atomic). Every claimed job
   * gets `leaseToken`, `leaseExpiresAt` and attempt + 1. Rows another claimer
   * holds are skipped, never waited for and never claimed twice: two
   * concurrent claims return disjoint sets. A job passed over (cap full)
   * keeps no trace of the attempt.
   *
   * At most `constrainedLimit` of the claimed jobs are constrained: jobs
   * with a concurrency key, or of a queue or task that has a cap (a paused
   * queue's jobs are not claimed at all). A constrained job past that number
   * is passed over like one whose cap is full, and the jobs behind it are
   * still taken, so the claim is the first `limit` jobs in claim order of
   * those it may take. When `constrainedLimit` is given, the returned list
   * holds the constrained jobs first, then the others, each part in claim
   * order (a caller that starts the first `constrainedLimit` jobs at once
   * starts every constrained one); otherwise it is in claim order.
   * A `limit` or `constrainedLimit` that is not an integer >= 0 is
   * InvalidArgumentError, before anything is written.
   */
  claim(params: ClaimParams): Promise<JobRecord[]>;

  /**
   * The worker's heartbeat, for many leases at once: running → running,
   * extending to `leaseExpiresAt` the lease of each job whose current
   * token is the item's (and nothing else). Returns the items whose lease
   * was extended; an item left out is no longer held (the job finished,
   * was cancelled or reclaimed) and was not written.
   */
  extendLeases(params: ExtendLeasesParams): Promise<LeaseKey[]>;

  /**
   * Reads which of these leases are still held (the job running under that
   * token), without writing: the worker's quick check for cancelled or
   * reclaimed jobs between heartbeats. Returns the held items.
   */
  heldLeases(params: HeldLeasesParams): Promise<LeaseKey[]>;

  /**
   * running → running for the lease holder, storing `progress` (JSON text).
   * Returns the job as stored, or null when the lease is not held (the job
   * is unchanged).
   */
  setProgress(params: SetProgressParams): Promise<JobRecord | null>;

  /**
   * running → running for the lease holder, storing `steps` (JSON text: the
   * job's whole list of steps, core/steps.ts). Returns the job as stored, or
   * null when the lease is not held (the job is unchanged): an attempt whose
   * lease expired, was reclaimed or cancelled records no step (R25).
   */
  recordStep(params: RecordStepParams): Promise<JobRecord | null>;

  /**
   * The lease holders' outcomes, each item fenced by its own state
   * (running) and lease token, so of two items for one job (a stale
   * attempt's and the current one's) at most one is applied:
   * - `complete`: running → succeeded, storing `result` (JSON text) and the
   *   finish time;
   * - `fail`: running → scheduled at `retryAt` when given, else running →
   *   dead (finished now); records `error` as the last error and appends it
   *   to the job's error history;
   * - `release`: running → ready, giving the attempt back (attempt - 1).
   * Each clears the lease, and a keyed job's freed slot is passed on in the
   * same transaction as its write. Returns results in input order: the
   * columns the outcome wrote (at least those of `SettledJob`; the job's
   * other columns are as claimed), or null for an item whose lease was not
   * held (a lost race: nothing written for it). Items may commit in separate
   * transactions; when the call throws, any subset of them may have committed.
   */
  settle(params: SettleParams): Promise<(SettledJob | null)[]>;

  /**
   * Optional (adapters on a database with transactions): opens ONE
   * transaction on the adapter's database and runs `work` in it, handing it
   * the transaction (a kysely `Transaction`, which `enqueue` also accepts as
   * `transaction`); then, in that same transaction, completes the job
   * (running → succeeded, fenced by `leaseToken`, with `work`'s return value
   * as its result, JSON text or null), as `settle` would. When the lease is
   * not held at that write (the job was cancelled, reclaimed or expired)
   * it throws LeaseLostError and the transaction rolls back: nothing `work`
   * wrote survives. When `work` throws, the transaction rolls back and its
   * error is rethrown as is. Never runs `work` twice. Returns the settled job.
   * `params` is read after `work` returned (so `work` may set `params.now` to
   * the time it finished). With `options.client` (a driver connection the caller holds, idle; on
   * PostgreSQL a `pg` Client or PoolClient) the transaction is opened on that
   * connection (BEGIN … COMMIT) and `work` is handed the client itself; an
   * adapter without that form throws UnsupportedError, one that cannot use
   * the client InvalidArgumentError, both before `work` runs.
   */
  completeInTransaction?(params: FencedParams, work: (transaction: object) => Promise<string | null>, options?: { client?: object }): Promise<SettledJob>;

  /**
   * Optional. `settle`, and with it a hand-off: the slots of capped queues
   * that the batch's completions free are taken by the next ready jobs of
   * those queues, in claim order, for the caller (claimed as by `claim` with
   * `handOff`'s lease, and returned in `claimed`). Guarantees: at most
   * `handOff.limit` jobs, none of a queue that is not among
   * `handOff.queues`, paused or uncapped, none of a task outside
   * `handOff.tasks` or with a cap; per queue never more than its
   * completions in the batch freed, and never so many that its running jobs
   * would exceed its cap as it stands when the write commits (a lowered cap
   * is not refilled). The hand-off and the outcomes commit together, and a
   * pause or cap change waits for them. An adapter may hand off nothing
   * (`claimed` empty, the outcomes written as by `settle`): the caller's
   * next claim takes the slots then.
   */
  settleAndHandOff?(params: SettleAndHandOffParams): Promise<{ settled: (SettledJob | null)[]; claimed: JobRecord[] }>;

  /**
   * Lists running jobs whose lease expired at `now` (lease_expires_at <= now),
   * oldest expiry first, up to `limit`. Read only.
   */
  listExpired(params: ListExpiredParams): Promise<JobRecord[]>;

  /**
   * For a job whose lease `leaseToken` is still current and expired at `now`:
   * running → scheduled at `retryAt` when given, else → dead, recording
   * `error`, clearing the lease, and passing a keyed job's slot on. Returns
   * the job as stored, or null when the job moved on (heartbeat,
   * completion, another sweeper): safe to run from many sweepers at once.
   */
  expire(params: ExpireParams): Promise<JobRecord | null>;

  /**
   * scheduled | ready | blocked | running → cancelled, clearing any lease,
   * finished at `now`, passing a keyed job's slot on. Returns the job as
   * stored, or null when it is in no such state (finished already, or
   * another call won); a running job's holder then loses its lease.
   */
  cancel(params: CancelParams): Promise<JobRecord | null>;

  /**
   * dead → scheduled, due at `now` (a claim stages it), with a fresh attempt
   * budget (attempt 0) and no finish time or error. Returns the job as
   * stored, or null when it is not dead (another replay won, or it never
   * died).
   */
  replay(params: ReplayParams): Promise<JobRecord | null>;

  /**
   * scheduled → scheduled, due at `now` (a claim stages it); attempts,
   * payload and controls unchanged. Returns the job as stored, or null when
   * it is not scheduled (claimed, cancelled or finished meanwhile).
   */
  runNow(params: RunNowParams): Promise<JobRecord | null>;

  /**
   * Replays, as `replay` does, up to `limit` dead jobs that died at or
   * before `diedBefore` (of `queue` and `task` when given), oldest death
   * first, in ONE transaction. Rows another transaction holds (a concurrent
   * replay or purge) are skipped, not waited for, where the engine has row
   * locks; a single-writer engine runs replays one after another. So
   * concurrent calls replay each job once. Returns the replayed records.
   */
  replayDead(params: ReplayDeadParams): Promise<JobRecord[]>;

  /**
   * Upserts a queue's controls; only the given fields change. Takes the
   * queue's control row lock, so once it returns no claim that started
   * before can still commit under the old setting. A queue left with every
   * control at its default (and no mark its jobs left) keeps no row: it is
   * not listed by listControls.
   */
  setQueueControl(params: SetQueueControlParams): Promise<QueueControl>;

  /** Upserts a task's controls (cap, rate limit); only the given fields change; a task left with neither keeps no row. Returns the stored control. */
  setTaskControl(params: SetTaskControlParams): Promise<TaskControl>;

  /** Every stored queue and task control. */
  listControls(): Promise<StoredControls>;

  /**
   * Deletes up to `limit` jobs whose state is one of `states` (finished
   * states only: succeeded, cancelled, dead) and whose `finished_at <=
   * finishedBefore` (of `queue`, `task` and `id` when given), oldest first, in ONE transaction. Rows another
   * transaction holds are skipped (a concurrent replay or purge wins), so
   * many purgers at once delete each job once. Returns how many it deleted.
   */
  purge(params: PurgeParams): Promise<number>;

  /**
   * Defence in depth for concurrency keys: finds up to `limit` keys that have
   * blocked jobs while fewer than their limit hold a slot (which no write of
   * docket leaves behind; a manual edit or a bug could), and rebalances each
   * under its lock in its own transaction (blocked → ready, up to the
   * limit). Returns the keys of which it unblocked a blocked job; a key
   * another caller repaired first is left out, and so is one where it only
   * admitted due scheduled jobs (staging's work, not a repair: e.g. a child
   * its last parent released moments before). Safe from many callers at once.
   */
  repairKeys(params: RepairKeysParams): Promise<string[]>;

  /**
   * A snapshot for operators, read-only, in a fixed number of queries,
   * each reading index ranges bounded by the live jobs, the dead jobs and
   * the jobs finished since `since`, whatever the history kept: job
   * counts per queue, task and state (succeeded and cancelled: those
   * finished since `since`; every other state: all); per queue the `run_at` of its oldest
   * ready job; the running jobs, soonest lease expiry first (at most
   * `runningLimit`); the keys with holders or blocked jobs (at most
   * `keysLimit`, by name); and the jobs finished since `since`, per state
   * and `bucketMs`-long bucket (by `finished_at - finished_at % bucketMs`).
   */
  stats(params: StatsParams): Promise<StoredStats>;

  /**
   * Stores a recurring job's definition under its name: a new one with
   * `lastTick` as its last fired tick; an existing one whose definition
   * (cron, timezone, task, queue, payload, options) differs gets the new
   * definition and its last tick moves forward to `lastTick` if behind
   * (never back); an existing one with the same definition is left as it
   * is, its last tick too (a restart's put loses no due tick). Concurrent
   * puts of a new name all succeed: one inserts, the others find its row.
   * Returns the stored row.
   */
  putSchedule(params: PutScheduleParams): Promise<StoredSchedule>;

  /** Every schedule, by name. */
  listSchedules(): Promise<StoredSchedule[]>;

  /** Deletes a schedule; false when there was none (or another call deleted it first). Jobs it enqueued stay. */
  deleteSchedule(params: DeleteScheduleParams): Promise<boolean>;

  /**
   * Pauses (`paused` true) or resumes a schedule; with `lastTick`, its last
   * tick also moves forward to it (never back), so a resume fires no tick
   * that came due while it was paused. Returns the schedule as stored, or
   * null when there is none. A fire racing it is decided by the row: the
   * tick's compare-and-set requires the schedule not paused.
   */
  pauseSchedule(params: { name: string; paused: boolean; now: number; lastTick?: number }): Promise<StoredSchedule | null>;

  /**
   * Fires one tick: in ONE transaction, moves the schedule's last tick to
   * `tick` if it is behind it (compare-and-set) and then stores `job`.
   * Of any number of concurrent calls for one tick, in any processes,
   * exactly one stores the job; the others, and any call for a tick at or
   * before the last one fired, store nothing and return null.
   */
  fireSchedule(params: FireScheduleParams): Promise<JobRecord | null>;

  /** One job, or null when there is none with this id. Read only. */
  get(params: GetParams): Promise<JobRecord | null>;

  /** Jobs matching every given filter, by id ascending, after `afterId`, up to `limit`. */
  list(params: ListParams): Promise<JobRecord[]>;

  /** How many jobs match every given filter (as `list`'s). Read only. */
  countJobs(params: CountParams): Promise<number>;

  /** Releases connections the adapter opened itself. Idempotent. Every other call after it rejects with ClosedError (code CLOSED). */
  close(): Promise<void>;

  /**
   * Optional. Subscribes to errors that happen outside any call, e.g. a
   * pooled connection dropped by the server while idle or checked out. Such
   * an error never escapes as an unhandled event; the adapter reports it
   * here (as a DocketError with the native error as `cause`) and recovers by
   * opening new connections. Errors of calls are thrown by the calls as usual.
   * Returns a function that unsubscribes.
   */
  onError?(listener: (error: DocketError) => void): () => void;

  /**
   * Optional. Subscribes to jobs becoming ready in ANY process (a committed
   * enqueue, a freed slot's promotion, a release, a replay), so idle workers
   * wake without waiting for their next poll. Notices are hints, possibly
   * lost or duplicated: polling stays the fallback. Returns a function that
   * unsubscribes.
   */
  onReady?(listener: (notice: ReadyNotice) => void): () => void;

  /**
   * The database's own view of what degrades a queue (see StoreHealth), read
   * without locks or writes; absent where the engine has nothing to report.
   */
  health?(): Promise<StoreHealth>;

  /**
   * Stores `worker`'s row of the worker registry, inserting it or replacing
   * the row with its id (only that worker writes it). Inserting it also
   * deletes rows that expired before `worker.heartbeatAt - WORKER_ROWS_KEPT_MS`
   * (crashed workers'); a heartbeat of a stored row writes that row only.
   */
  putWorker(worker: WorkerRecord): Promise<void>;

  /** Deletes the worker's row (a worker that stopped); nothing when there is none. */
  removeWorker(params: { id: string }): Promise<void>;

  /** The registered workers whose row had not expired at `now`, by name then id, at most `limit`. Reads only. */
  listWorkers(params: { now: number; limit: number }): Promise<WorkerRecord[]>;
}

/**
 * What an adapter declares about how concurrent calls meet in its store.
 * Every member is optional; the default (absent) is the conservative one,
 * so an adapter that declares nothing is treated as a single writer.
 */
export interface AdapterCapabilities {
  /**
   * Transactions lock the rows they read for writing (`SELECT … FOR
   * UPDATE`), so several writers may run at once. Default false: one
   * writer at a time (SQLite, the memory adapter), where a write never
   * meets a row another transaction holds.
   */
  readonly rowLocks?: boolean;
  /**
   * A call that meets rows another transaction holds passes over them
   * rather than waiting (claims, `replayDead`, `purge`). Default false: it
   * waits, or, on a single writer, runs after the other.
   */
  readonly skipLocked?: boolean;
}

/** What `migrate` did: the versions it applied (empty when current) and the schema version now. */
export interface MigrateResult {
  applied: number[];
  version: number;
}

export interface PayloadLimitParams {
  /** The caller's open transaction (see EnqueueParams.transaction); absent: the adapter's own connections. */
  transaction?: object;
}

export interface GetByIdempotencyKeyParams {
  key: string;
}

export interface GetParams {
  id: number;
}

export interface HeldLeasesParams {
  items: readonly LeaseKey[];
}

export interface SetProgressParams extends FencedParams {
  /** The progress value as JSON text. */
  progress: string;
}

export interface RecordStepParams extends FencedParams {
  /** The job's steps after this one, as JSON text. */
  steps: string;
}

export interface ListExpiredParams {
  now: number;
  limit: number;
}

/** A sweeper's expiry: the job, the expired lease's token, and the failure to record (see FailParams). */
export type ExpireParams = FailParams;

export interface CancelParams {
  id: number;
  now: number;
}

export interface ReplayParams {
  id: number;
  now: number;
  /** Forget the job's recorded steps (`ctx.step`): its next attempt runs every step again. Default false: they are kept. */
  resetSteps?: boolean;
}

/**
 * A running worker as it registers and heartbeats itself: a crashed one's
 * row expires (`expiresAt`, a lease after its last heartbeat) and is no
 * longer listed.
 */
export interface WorkerRecord {
  /** Unique per worker instance (its name and a random suffix). */
  id: string;
  name: string;
  host: string;
  pid: number;
  /** The queues it claims from, as JSON text (a string array). */
  queues: string;
  concurrency: number;
  startedAt: number;
  heartbeatAt: number;
  expiresAt: number;
  /** Jobs it held (running or claimed ahead) at its last heartbeat. */
  jobsInHand: number;
}

/** Expired worker rows are kept this long (then deleted by the next registration). */
export const WORKER_ROWS_KEPT_MS = 3_600_000;

export interface RunNowParams {
  id: number;
  now: number;
}

export interface SetQueueControlParams {
  queue: string;
  /** Absent: unchanged (false for a new row). */
  paused?: boolean;
  /** Absent: unchanged (null, no cap, for a new row). */
  maxRunning?: number | null;
  /** Absent: unchanged (null, no limit, for a new row). A new limit keeps the starts already in its window. */
  rateLimit?: RateLimit | null;
}

export interface SetTaskControlParams {
  task: string;
  /** Null: no cap. Absent: unchanged (null for a new row). */
  maxRunning?: number | null;
  /** Null: no limit. Absent: unchanged (null for a new row). */
  rateLimit?: RateLimit | null;
}

/** Every stored control, by queue and by task. */
export interface StoredControls {
  queues: QueueControl[];
  tasks: TaskControl[];
}

export interface RepairKeysParams {
  now: number;
  limit: number;
}

export interface DeleteScheduleParams {
  name: string;
}

/**
 * A job became ready in `queue` (null: unknown, e.g. after a reconnect
 * notices may have been missed). `due`: it is a due scheduled job that a
 * claim must stage first.
 */
export interface ReadyNotice {
  queue: string | null;
  due: boolean;
}

export interface NewJob {
  task: string;
  queue: string;
  payload: string;
  state: Extract<JobState, "ready" | "scheduled">;
  priority: number;
  runAt: number;
  maxAttempts: number;
  /** Per-job backoff overrides as JSON text, or null. */
  backoff: string | null;
  /**
   * The job's concurrency key. A ready job is admitted under the key's lock
   * by the core's `admit`: ready, blocked, or discarded (stored cancelled);
   * a scheduled one when it falls due. The key's stored limit becomes `limit`.
   */
  concurrency?: ConcurrencySpec | null;
  /** Time limit of one attempt in ms, stored with the job; null: none of its own. */
  timeoutMs?: number | null;
  /** At most one job holds an idempotency key at a time (see EnqueueParams.keysReleasedBefore). */
  idempotencyKey?: string | null;
  /** Stored as the job's traceContext. */
  traceContext?: string | null;
  /**
   * The job's rate key: the key's stored limit becomes `limit` per
   * `periodMs` (the latest enqueue's), and a claim starts the job only
   * within it (see RateLimitSpec).
   */
  rateLimit?: RateLimitSpec | null;
  /**
   * A debounce key (never with `concurrency` or `idempotencyKey`; the job
   * is scheduled at `runAt`). When a job of the same queue, task and key is
   * pending (DEBOUNCE_PENDING_STATES), nothing is inserted: under that
   * job's row lock, its payload, priority, maxAttempts, backoff, timeoutMs
   * and traceContext become this job's, its run time the core's
   * `mergedRunAt` and its state scheduled (TRANSITIONS.debounce), and
   * its record is returned with `created: false`. A later job of a batch
   * merges into an earlier one's. The claim moves a job out of pending under
   * its row lock and clears its key (`claim` sets the debounce key null, so a
   * retried, released or replayed job is never merged into), so a merge
   * lands before the claim or finds no pending job and inserts the next one:
   * at most one pending job per key (R22).
   */
  debounce?: DebounceSpec | null;
  /**
   * The job's fairness key: its queue becomes fair (claims serve its keys
   * in weighted round-robin, see core/fairness.ts), and the key's stored
   * weight becomes `weight` (the latest enqueue's).
   */
  fairness?: FairnessSpec | null;
  /**
   * Its parents (never with `debounce`). Under the row locks of the stored
   * parents, in the enqueue's transaction: a parent that does not exist is
   * NotFoundError (before any other check of the parents), one dead or
   * cancelled InvalidArgumentError, and nothing is stored. The job is stored waiting, with its count of parents not yet
   * succeeded, and each live parent is marked as having children (so that
   * the write that ends it settles them, see `endsJob`); with every parent
   * succeeded already it is stored as it would be without parents. The last
   * parent's success moves it to scheduled (TRANSITIONS.unwait) in that
   * success's transaction; a parent that ends dead or cancelled cancels its
   * waiting descendants, with a reason naming it.
   */
  after?: AfterSpec | null;
}

/** A job's parents and children by id (DocketAdapter.dependencies). */
export interface Dependencies {
  parents: number[];
  children: number[];
}

/**
 * The parents of a new job: stored jobs by id, and jobs of the same batch by
 * their index in it. The core has checked that every index names another
 * job of the batch and that the batch's refs form no cycle.
 */
export interface AfterSpec {
  ids: readonly number[];
  refs: readonly number[];
}

export interface QueueControl {
  queue: string;
  paused: boolean;
  maxRunning: number | null;
  rateLimit: RateLimit | null;
}

export interface TaskControl {
  task: string;
  maxRunning: number | null;
  rateLimit: RateLimit | null;
}

export interface EnqueueParams {
  jobs: NewJob[];
  now: number;
  /**
   * A finished job (succeeded, cancelled, dead) whose `finished_at` is at or
   * before this no longer holds its idempotency key: the key is taken from it
   * and given to the new job. Absent: a key holds until its job is purged.
   */
  keysReleasedBefore?: number;
  /**
   * The caller's own open transaction, in a form the adapter accepts (a
   * kysely `Transaction` of the same database; on PostgreSQL also a `pg`
   * client inside BEGIN). The jobs are written in it, so they exist if and
   * only if it commits; key admission takes the keys' locks in it; notices
   * to other processes ride on it (delivered at commit). Anything else is
   * InvalidArgumentError.
   */
  transaction?: object;
}

/** What `enqueue` returns per job: the stored record, and whether this call created it. */
export interface EnqueuedRecord extends JobRecord {
  created: boolean;
}

export interface ClaimParams {
  queues: readonly string[];
  /**
   * When given, only jobs of these tasks are claimed; jobs of other tasks are
   * left exactly as they were (an empty list claims nothing). Undefined: any task.
   */
  tasks?: readonly string[];
  limit: number;
  /**
   * At most this many of the claimed jobs may be constrained (see `claim`).
   * Default: `limit` (any of them may be). A worker passes the number of its
   * handlers free to start a job now, so a job that holds a cap's or a key's
   * slot never waits in its buffer while another worker could run it.
   */
  constrainedLimit?: number;
  now: number;
  leaseToken: string;
  leaseExpiresAt: number;
  /** The claiming worker's name, stored with each job it claims (JobRecord.worker). Default null. */
  worker?: string | null;
  /**
   * Whether to admit due scheduled jobs first (see `claim`). Default true.
   * A worker passes false between its periodic staging passes, so a busy
   * claim loop does not read the scheduled jobs before every claim.
   */
  stage?: boolean;
  /**
   * Told, when a rate limit kept a ready job from this claim, the earliest
   * time one of those limits has room again (so the caller can look again
   * then, not sooner). Not called otherwise.
   */
  onRateLimited?: (at: number) => void;
}

export interface FencedParams {
  id: number;
  leaseToken: string;
  now: number;
  /**
   * Optional: the job's concurrency key as the caller last read it (a job's
   * key never changes). With `null`, an adapter may apply a slot-freeing
   * write as one statement without reading the key first; it must then
   * check in that write that the job has no key, and take the full path when
   * it has. Omitted: the adapter reads the key itself.
   */
  concurrencyKey?: string | null;
}

export interface CompleteParams extends FencedParams {
  /** The handler's return value as JSON text; null or absent: none. */
  result?: string | null;
}

export interface FailParams extends FencedParams {
  error: string;
  /** When set, retry at this time; when null, the job goes to dead. */
  retryAt: number | null;
}

/** A job and the lease token an attempt holds on it. */
export interface LeaseKey {
  id: number;
  leaseToken: string;
}

export interface ExtendLeasesParams {
  items: readonly LeaseKey[];
  now: number;
  leaseExpiresAt: number;
}

/** What an outcome changes on a job: its state, attempt, times, error and (cleared) lease. */
export type SettledJob = Pick<JobRecord, "id" | "state" | "attempt" | "runAt" | "updatedAt" | "finishedAt" | "lastError" | "leaseToken" | "leaseExpiresAt" | "result"> & {
  /**
   * The children this write released (waiting → scheduled, see NewJob.after),
   * for the caller to stage when due; absent when none. A batch's releases
   * may all be reported on one of its jobs.
   */
  released?: readonly ReleasedChild[];
};

/**
 * A child a parent's success released: its queue and run time. `queue` is
 * null when the adapter cannot tell which children its write released
 * (MariaDB, without UPDATE … RETURNING): then it reports one such entry,
 * due now, whenever the write changed a waiting child, and the caller
 * stages at once whatever its queues.
 */
export interface ReleasedChild {
  queue: string | null;
  runAt: number;
}

/**
 * One outcome for `settle`, by `kind` (see `settle` for what each writes).
 * `queue` and `task`, when given, are the job's as claimed (see
 * SettleParams.announceFreed).
 */
export type SettleItem = ((CompleteParams & { kind: "complete" }) | (FencedParams & { kind: "release" }) | (FailParams & { kind: "fail" })) & { queue?: string; task?: string };

export interface SettleParams {
  items: readonly SettleItem[];
  /**
   * The caller will not claim the slots these outcomes free (its last claim
   * found nothing to claim): an adapter may announce to other processes
   * (ReadyNotice) the queue of each item that frees a slot of a capped
   * queue or task, so their idle workers claim it instead of waiting for a
   * poll. Default false: the caller claims the slots itself.
   */
  announceFreed?: boolean;
}

/** See `settleAndHandOff`: the outcomes, and the claim that takes the capped slots they free. */
export interface SettleAndHandOffParams extends SettleParams {
  handOff: Pick<ClaimParams, "queues" | "tasks" | "limit" | "now" | "leaseToken" | "leaseExpiresAt" | "worker">;
}

export interface PurgeParams {
  states: readonly JobState[];
  finishedBefore: number;
  limit: number;
  /** Only jobs of this queue. */
  queue?: string;
  /** Only jobs of this task. */
  task?: string;
  /** Only this job (deleting one finished job by id). */
  id?: number;
}

export interface ReplayDeadParams {
  diedBefore: number;
  /** As ReplayParams.resetSteps. */
  resetSteps?: boolean;
  limit: number;
  now: number;
  /** Only jobs of this queue. */
  queue?: string;
  /** Only jobs of this task. */
  task?: string;
}

export interface StoredSchedule {
  name: string;
  cron: string;
  timezone: string;
  task: string;
  queue: string;
  /** The payload of every job it enqueues, as JSON text. */
  payload: string;
  /** The enqueue options of its jobs (priority, maxAttempts), as JSON text. */
  options: string;
  /** The last tick fired (epoch ms); a new schedule starts at its latest tick before creation. */
  lastTick: number;
  /** A paused schedule fires no tick (see pauseSchedule); a new one is not paused, and redefining one keeps this. */
  paused: boolean;
  createdAt: number;
  updatedAt: number;
}

/** A schedule to store: its definition and the last tick a new one starts from (see putSchedule). */
export type PutScheduleParams = Omit<StoredSchedule, "createdAt" | "updatedAt" | "paused"> & { now: number };

export interface FireScheduleParams {
  name: string;
  tick: number;
  job: NewJob;
  now: number;
}

/**
 * What keeps a store's dead rows from being cleaned up, as the database
 * reports it (PostgreSQL: pg_stat_activity and pg_stat_user_tables;
 * MariaDB: information_schema.INNODB_TRX and the purge history). A reading
 * needs the privileges to see other sessions (PostgreSQL `pg_read_all_stats`,
 * MariaDB `PROCESS`).
 */
export interface StoreHealth {
  /**
   * Age of the oldest transaction that holds the horizon (ms; 0 when none):
   * PostgreSQL, one holding a transaction id or a snapshot (a READ COMMITTED
   * session idle between statements holds neither); MariaDB, any open InnoDB
   * transaction. Without the privileges above: PostgreSQL reads the role's
   * own sessions only; MariaDB cannot read it at all, and it is null.
   */
  oldestTransactionAgeMs: number | null;
  /** Dead row versions per docket table (PostgreSQL: n_dead_tup, an estimate); null where the engine has no such count. */
  deadRows: { table: string; dead: number; live: number }[] | null;
  /** Undo records not yet purged (MariaDB's history list length); null elsewhere, and on MariaDB without PROCESS. */
  purgeBacklog: number | null;
  /**
   * Whether the database removes docket's dead rows on its own: PostgreSQL's
   * autovacuum runs (the server's `autovacuum` and `track_counts` on) and no
   * docket table turns it off (`autovacuum_enabled = false`). false: dead
   * rows pile up until someone runs VACUUM, and claims slow down as they do
   * (bench/horizon.ts: start p99 39 → 139 ms in 2 minutes at 1,000 jobs/s).
   * null where the engine has no such switch (MariaDB purges on its own).
   */
  autovacuum: boolean | null;
}

export interface StatsParams {
  since: number;
  bucketMs: number;
  runningLimit: number;
  keysLimit: number;
}

export interface StoredStats {
  counts: { queue: string; task: string; state: JobState; count: number }[];
  oldestReady: { queue: string; runAt: number }[];
  running: JobRecord[];
  /**
   * `limit` is null for a key with no stored limit row (which docket never
   * leaves behind); `holders` are its ready and running jobs, `running` those
   * of them running.
   */
  keys: { key: string; limit: number | null; holders: number; running: number; blocked: number }[];
  finished: { state: JobState; bucket: number; count: number }[];
  /**
   * Every queue and task rate limit, and the rate keys with ready jobs (then
   * others, by name; at most `keysLimit` keys): its log of starts as stored
   * (see core/rate-limit.ts) and how many ready jobs it applies to.
   */
  rateLimits: StoredRateLimit[];
}

export interface StoredRateLimit {
  scope: "queue" | "task" | "key";
  name: string;
  limit: number;
  periodMs: number;
  starts: string | null;
  /** Ready jobs of the queue, of the task, or with the key. */
  ready: number;
}

/** The most ids one `list({ ids })` takes. */
export const LIST_IDS_MAX = 500;

/** `list`'s filters, for a count. */
export type CountParams = Pick<ListParams, "state" | "queue" | "task" | "concurrencyKey">;

export interface ListParams {
  state?: JobState;
  queue?: string;
  task?: string;
  /** Only jobs of this concurrency key. */
  concurrencyKey?: string;
  /**
   * Only jobs whose last error contains this text (1 to MAX_SEARCH_LENGTH
   * characters): every character literal (a LIKE wildcard matches only
   * itself), case-sensitive. Jobs without a last error never match. No index
   * serves it: the rows the other filters leave are scanned.
   */
  errorContains?: string;
  afterId?: number;
  /** Only these jobs (at most LIST_IDS_MAX ids; those that do not exist are left out). */
  ids?: readonly number[];
  limit: number;
}
