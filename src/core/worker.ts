import type { SettleItem, SettledJob } from "./adapter.ts";
import type { Docket, TaskMap } from "../client/docket.ts";
import { InvalidArgumentError, LeaseLostError } from "./errors.ts";
import { shown } from "./shown.ts";
import type { DocketEvent, EventOperation, WorkerEvent } from "./events.ts";
import { toJob, type Job, type JobRecord } from "./job.ts";
import { LazyAbort } from "./lazy-abort.ts";
import { errorBackoffDelay } from "./retry.ts";
import { nextTurn } from "./turn.ts";
import { onceOnSignals, reraise, SHUTDOWN_SIGNALS, type ShutdownSignal } from "./signals.ts";
import { describeThrown, messageOf } from "./thrown.ts";
import { checkKeys, serializePayload, validateInteger, validateName } from "./validate.ts";
import { attemptLabel, oneLine, validateLogger, WorkerLog, type WorkerLogger } from "./worker-log.ts";

export { describeThrown } from "./thrown.ts";
export type { WorkerLogger } from "./worker-log.ts";

/** What a handler gets besides its payload. */
export interface JobContext<P = unknown> {
  job: Job<P>;
  /**
   * Aborted when the worker stops (graceful shutdown), when the job's lease
   * is lost (cancelled, or reclaimed after missed heartbeats), or when the
   * job's timeout passes. A handler should stop soon after; whatever it
   * returns then is not recorded.
   */
  signal: AbortSignal;
  /**
   * Records `value` (JSON, bounded like payloads) as the job's progress,
   * readable through `docket.get` while it runs. Fenced by the lease: when
   * the attempt no longer holds it, rejects with LeaseLostError and writes nothing.
   */
  progress(value: unknown): Promise<void>;
}

export type Handler<P> = (payload: P, ctx: JobContext<P>) => unknown | Promise<unknown>;

/** Which step of the worker an `error` event comes from. */
export type WorkerOperation = EventOperation;

export type { WorkerEvent } from "./events.ts";

export interface WorkerOptions<T extends TaskMap> {
  /**
   * One handler per task. The worker claims only jobs of these tasks, so a
   * job of a task it cannot run waits for a worker that can (a rolling
   * deploy does not spend attempts on old workers).
   */
  handlers: { [K in keyof T]?: Handler<T[K]> };
  /**
   * A catch-all: when given, the worker claims jobs of EVERY task and runs
   * this for the tasks that have no entry in `handlers`.
   */
  fallback?: Handler<unknown>;
  /**
   * Queues to take jobs from. Default: the queues the handled tasks' jobs go
   * to: a registered task's queue (DocketOptions.tasks), the docket's default
   * queue for a task not registered; with `fallback`, the default queue and
   * every registered task's queue. When given without the registered queue
   * of a handled task, `start()` warns once.
   */
  queues?: string[];
  /**
   * This worker's name, stored with every job it claims (`JobRecord.worker`,
   * the dashboard's running jobs, the error history), e.g. a host or pod
   * name. Default `pid-<pid>-<random>` (`w-<random>` where there is no pid).
   */
  name?: string;
  /** Handlers running at once in this worker. Default 10. */
  concurrency?: number;
  /**
   * Jobs claimed ahead into a local buffer, besides the running ones, so a
   * finishing handler starts the next job without a round trip. Buffered
   * jobs are claimed like running ones: they hold leases (heartbeated), are
   * released at a graceful stop and reclaimed after a crash within one
   * lease. 0 claims only for free handlers. Default "auto": about 250 ms
   * of work at the rate this worker has been finishing jobs, at least
   * `concurrency` and at most 2,000 (1,000 on a blocking adapter; slow jobs are not hoarded: at 10 jobs/s
   * the buffer is `concurrency`).
   */
  prefetch?: number | "auto";
  /** Lease length; a job whose worker misses heartbeats for this long is reclaimed. Default 30 000 ms. */
  leaseMs?: number;
  /** Heartbeat period; must be shorter than leaseMs. Default leaseMs / 3. */
  heartbeatMs?: number;
  /** Sleep between claims when no job was ready. Default 1000 ms. */
  pollMs?: number;
  /** Period of the expired-lease sweep. Default leaseMs / 2. */
  reclaimMs?: number;
  /** How long `stop()` lets aborted handlers finish before releasing their jobs. Default 10 000 ms. */
  shutdownTimeoutMs?: number;
  /**
   * Default time limit of one attempt, for jobs that carry no `timeoutMs` of
   * their own (per job or per task). Past it the handler's signal aborts and
   * the attempt fails with a timeout reason. Default: none.
   */
  timeoutMs?: number;
  /** Observer of transitions this worker won, and of errors it survived. Must not throw. */
  onEvent?: (event: WorkerEvent) => void;
  /**
   * Where the worker reports, one line each, besides `onEvent`: failed
   * attempts that will retry, attempts reclaimed or lost, and errors it
   * survived (claim, heartbeat, outcome writes, connection loss) at `warn`;
   * dead letters at `error` (else `warn`); attempts ended by a cancel at
   * `info` (dropped without it). Default `console`; `null` silences it.
   */
  logger?: WorkerLogger | null;
}

const WORKER_OPTION_KEYS = [
  "handlers",
  "fallback",
  "queues",
  "name",
  "concurrency",
  "prefetch",
  "leaseMs",
  "heartbeatMs",
  "pollMs",
  "reclaimMs",
  "shutdownTimeoutMs",
  "timeoutMs",
  "onEvent",
  "logger",
] as const satisfies readonly (keyof WorkerOptions<TaskMap>)[];

/** The automatic prefetch buffer holds about this much work (ms at the current rate), between `concurrency` and AUTO_PREFETCH_MAX jobs. */
const AUTO_PREFETCH_MS = 250;
const AUTO_PREFETCH_MAX = 2_000;
/** AUTO_PREFETCH_MAX on a blocking adapter, whose claim of n jobs holds the event loop for its whole run (~17 µs per job on SQLite). */
const AUTO_PREFETCH_MAX_BLOCKING = 1_000;
/** A finishing-rate sample spans this long, or ends sooner once RATE_SAMPLE_JOBS jobs finished in it (see #prefetch). */
const RATE_WINDOW_MS = 50;
const RATE_SAMPLE_JOBS = 100;

/** Batched outcome writes a worker keeps in flight at once. */
const MAX_FLUSHES = 3;

/** The longest a running handler's signal waits to abort after its job was cancelled in another process (see #checkLeases). */
const LEASE_CHECK_MAX_MS = 1000;

/** Why an attempt was lost (a `lost` event's reason): the job was cancelled; its lease expired and a sweep took it; neither is known. */
const LOST_CANCELLED = "cancelled";
const LOST_RECLAIMED = "reclaimed (lease expired)";
const LOST_UNKNOWN = "lease lost (cancelled or reclaimed)";
/** Lost attempts reported at once whose job is read to tell a cancel from a reclaim; the rest are LOST_UNKNOWN. */
const LOST_READS_MAX = 20;

/** How often a worker runs the retention pass (`docket.purgeFinished()`). */
const PURGE_EVERY_MS = 60_000;

/** First pause after a failed claim or outcome write; doubles per failure in a row. */
const ERROR_BACKOFF_BASE_MS = 100;
/** Longest pause between tries after failures in a row. */
const ERROR_BACKOFF_MAX_MS = 30_000;

/** One attempt of one job in this worker, from claim to outcome. Identified by `attemptKey`. */
interface Attempt {
  readonly record: JobRecord;
  /** attemptKey(record), made once. */
  readonly key: string;
  readonly controller: LazyAbort;
  done: Promise<void>;
  /**
   * buffered: claimed, its handler not started yet (heartbeats keep the
   * lease); running: the handler has not settled (heartbeats keep the
   * lease, also while stopping); settling: its outcome is being written;
   * retrying: an outcome write failed and is tried again (heartbeats keep
   * the lease).
   */
  phase: "buffered" | "running" | "settling" | "retrying";
  /** When the lease ends unless a heartbeat extends it, as last written. */
  leaseExpiresAt: number;
}

type Outcome =
  /** `result`: the handler's return value as JSON text, or null. */
  | { kind: "succeeded"; result: string | null }
  /** `timedOut`: the attempt passed its time limit. */
  | { kind: "failed"; error: string; timedOut: boolean }
  /** Interrupted by shutdown: hand back without spending an attempt. */
  | { kind: "released" };

/**
 * Runs handlers for claimed jobs. Guarantees:
 * - a job is run only after its claim committed, under a lease this worker
 *   heartbeats until the handler settles (also while stopping); every write
 *   about it is fenced by that lease;
 * - only jobs of tasks it has handlers for are claimed (all tasks with `fallback`);
 * - a handler that throws anything (or returns a rejected promise, or
 *   passes its timeout) is a failed attempt with the reason stored, never a
 *   crashed worker;
 * - an outcome write that fails (connection lost) is retried with backoff
 *   while the lease is still ours, heartbeating it meanwhile;
 * - failed claims back off exponentially (with jitter) and reset on success;
 * - the claim loop yields to the event loop between claims, so timers
 *   (heartbeats, sweeps, the application's) run during a backlog;
 * - `stop()` aborts in-flight handlers, waits up to `shutdownTimeoutMs`
 *   (heartbeating them), then releases unfinished jobs back to ready (not
 *   counted as an attempt).
 */
export class Worker<T extends TaskMap = TaskMap> {
  readonly #docket: Docket<T>;
  readonly #handlers: Map<string, Handler<unknown>>;
  readonly #fallback: Handler<unknown> | null;
  readonly #queues: string[];
  readonly #concurrency: number;
  /** A fixed buffer size, or null for "auto" (see WorkerOptions.prefetch). */
  readonly #fixedPrefetch: number | null;
  /** Handlers finished so far, and the finishing rate (jobs per ms, smoothed) the auto buffer is sized by. */
  #finished = 0;
  #rate = { perMs: 0, at: 0, finished: 0, sampled: false };
  readonly #leaseMs: number;
  readonly #heartbeatMs: number;
  readonly #pollMs: number;
  readonly #reclaimMs: number;
  readonly #shutdownTimeoutMs: number;
  readonly #timeoutMs: number | null;
  readonly #onEvent: (event: WorkerEvent) => void;
  readonly #log: WorkerLog;
  /** Handled tasks whose registered queue this worker does not take from; warned about at the first start. */
  #unreachable: [task: string, queue: string][] = [];
  /**
   * In-flight attempts by `attemptKey` (job id and lease token; one claim's
   * jobs share a token): an attempt's bookkeeping never touches another
   * attempt of the same job.
   */
  readonly #inFlight = new Map<string, Attempt>();
  /** Claimed attempts whose handlers have not started, in claim order. */
  readonly #buffer: Attempt[] = [];
  /** Handlers running now (at most `concurrency`); a handler's outcome may still be unrecorded after it leaves. */
  #active = 0;
  /** Outcomes waiting for the next batched write (`#flush`). */
  #pending: { attempt: Attempt; outcome: Outcome; written: () => void }[] = [];
  /** Batched outcome writes in flight (at most MAX_FLUSHES) and whether one is scheduled for this tick. */
  #flushes = 0;
  #flushScheduled = false;
  /** Outcomes queued in #pending or in a batched write under way (see #claimLoop's room). */
  #recording = 0;
  /** Whether the next claim may overlap the write of finished jobs' outcomes: not when statements block the thread. */
  readonly #overlap: boolean;
  /** When the last claim admitted due scheduled jobs; a claim stages at most every pollMs unless asked sooner. */
  #lastStage = Number.NEGATIVE_INFINITY;
  #stageRequested = false;
  #stageTimer: { at: number; timer: ReturnType<typeof setTimeout> } | null = null;
  #running = false;
  #stopping = false;
  #abandon = false;
  #loop: Promise<void> | null = null;
  #wake: (() => void) | null = null;
  #wakePending = false;
  #wakeScheduled = false;
  #timers: ReturnType<typeof setInterval>[] = [];
  readonly #passes = new Set<Promise<void>>();
  #unsubscribe: (() => void) | null = null;
  #lastPurge = Number.NEGATIVE_INFINITY;

  constructor(docket: Docket<T>, options: WorkerOptions<T>) {
    if (!options || typeof options.handlers !== "object" || options.handlers === null) {
      throw new InvalidArgumentError("worker({ handlers }) needs a handlers object");
    }
    checkKeys(options, WORKER_OPTION_KEYS, "worker(options)");
    this.#docket = docket;
    this.#handlers = new Map();
    for (const [task, handler] of Object.entries(options.handlers)) {
      if (handler === undefined) continue;
      if (typeof handler !== "function") throw new InvalidArgumentError(`handler for ${shown(task)} must be a function`);
      this.#handlers.set(validateName(task, "handlers key (task name)"), handler as Handler<unknown>);
    }
    if (options.fallback !== undefined && typeof options.fallback !== "function") throw new InvalidArgumentError("fallback must be a function");
    this.#fallback = options.fallback ?? null;
    if (this.#handlers.size === 0 && !this.#fallback) {
      throw new InvalidArgumentError("worker({ handlers }) needs at least one handler (or a fallback)");
    }
    const registered = docket.taskQueues();
    if (options.queues === undefined) {
      const queues = this.#fallback ? [docket.defaultQueue, ...registered.values()] : [...this.#handlers.keys()].map((task) => registered.get(task) ?? docket.defaultQueue);
      this.#queues = [...new Set(queues)];
    } else {
      if (!Array.isArray(options.queues)) throw new InvalidArgumentError("queues must be an array of queue names");
      this.#queues = options.queues.map((q) => validateName(q, "queue"));
      if (this.#queues.length === 0) throw new InvalidArgumentError("queues must name at least one queue");
      for (const task of this.#handlers.keys()) {
        const queue = registered.get(task);
        if (queue !== undefined && !this.#queues.includes(queue)) this.#unreachable.push([task, queue]);
      }
    }
    this.name = options.name === undefined ? defaultWorkerName() : validateName(options.name, "name");
    this.#concurrency = validateInteger(options.concurrency ?? 10, "concurrency", 1, 10_000);
    this.#overlap = docket.adapter.blocking !== true;
    this.#fixedPrefetch = options.prefetch === undefined || options.prefetch === "auto" ? null : validateInteger(options.prefetch, "prefetch", 0, 10_000);
    this.#leaseMs = validateInteger(options.leaseMs ?? 30_000, "leaseMs", 50, 24 * 3600_000);
    this.#heartbeatMs = validateInteger(options.heartbeatMs ?? Math.floor(this.#leaseMs / 3), "heartbeatMs", 10, this.#leaseMs - 1);
    this.#pollMs = validateInteger(options.pollMs ?? 1000, "pollMs", 1, 3600_000);
    this.#reclaimMs = validateInteger(options.reclaimMs ?? Math.floor(this.#leaseMs / 2), "reclaimMs", 10, 24 * 3600_000);
    this.#shutdownTimeoutMs = validateInteger(options.shutdownTimeoutMs ?? 10_000, "shutdownTimeoutMs", 0, 24 * 3600_000);
    this.#timeoutMs = options.timeoutMs === undefined ? null : validateInteger(options.timeoutMs, "timeoutMs", 1, 24 * 3600_000);
    if (options.onEvent !== undefined && typeof options.onEvent !== "function") throw new InvalidArgumentError("onEvent must be a function");
    this.#onEvent = options.onEvent ?? (() => undefined);
    this.#log = new WorkerLog(validateLogger(options.logger));
  }

  /** This worker's name (WorkerOptions.name), stored with the jobs it claims. */
  readonly name: string;

  /** Jobs currently being handled by this worker. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Starts claiming. Idempotent while running. */
  start(): Promise<void> {
    if (this.#running) return Promise.resolve();
    this.#running = true;
    if (this.#unreachable.length > 0) {
      const tasks = this.#unreachable.map(([task, queue]) => `task ${JSON.stringify(task)} is registered to queue ${JSON.stringify(queue)}`).join("; ");
      const queues = this.#queues.map((q) => JSON.stringify(q)).join(", ");
      this.#log.warn(oneLine(`${tasks}, which this worker does not take from (queues ${queues}): such jobs run here only if enqueued with one of its queues`, 1000));
      this.#unreachable = [];
    }
    this.#stopping = false;
    this.#abandon = false;
    this.#timers = [
      setInterval(() => this.#pass(() => this.#heartbeatAll()), this.#heartbeatMs),
      setInterval(() => this.#pass(() => this.#reclaim()), this.#reclaimMs),
      setInterval(() => this.#pass(() => this.#checkLeases()), Math.min(this.#pollMs, LEASE_CHECK_MAX_MS)),
    ];
    const unsubscribeErrors = this.#docket.adapter.onError?.((error) => this.#emit({ type: "error", error, operation: "connection" }));
    const unsubscribeEnqueues = this.#docket.onEnqueued((queues, due) => {
      if (!this.#queues.some((q) => queues.has(q))) return;
      if (due) this.#stageRequested = true;
      this.#signalWake();
    });
    const unsubscribeCancels = this.#docket.onCancelled((id) => void this.#abortLost((a) => a.record.id === id, LOST_CANCELLED));
    const unsubscribeReady = this.#docket.adapter.onReady?.((notice) => {
      if (notice.queue !== null && !this.#queues.includes(notice.queue)) return;
      if (notice.due) this.#stageRequested = true;
      this.#signalWake();
    });
    this.#unsubscribe = () => {
      unsubscribeErrors?.();
      unsubscribeEnqueues();
      unsubscribeCancels();
      unsubscribeReady?.();
    };
    this.#loop = this.#claimLoop();
    return Promise.resolve();
  }

  /**
   * Graceful stop: no new claims; in-flight handlers are aborted and get up
   * to `timeoutMs` to finish (their results are recorded as usual, and their
   * leases heartbeated meanwhile); jobs whose handler is still running after
   * that are released back to ready. Resolves when no job of this worker is
   * left running.
   */
  async stop(options: { timeoutMs?: number } = {}): Promise<void> {
    checkKeys(options, ["timeoutMs"], "stop(options)");
    if (!this.#running) return;
    const timeoutMs = validateInteger(options.timeoutMs ?? this.#shutdownTimeoutMs, "timeoutMs", 0, 24 * 3600_000);
    this.#stopping = true;
    this.#signalWake();
    await this.#loop;
    if (this.#stageTimer) clearTimeout(this.#stageTimer.timer);
    this.#stageTimer = null;
    // Jobs never started go back at once, in one batch.
    const buffered = this.#buffer.splice(0).filter((a) => this.#inFlight.get(a.key) === a);
    await Promise.all(buffered.map((a) => this.#record(a, { kind: "released" })));
    for (const a of this.#inFlight.values()) a.controller.abort(new Error("worker stopping"));
    const all = Promise.all([...this.#inFlight.values()].map((a) => a.done));
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([all, new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
    // Outcome writes still retrying stop here; their leases expire and the sweep decides.
    this.#abandon = true;
    for (const a of [...this.#inFlight.values()]) {
      if (a.phase === "running") await this.#writeOutcome(a, { kind: "released" });
      else this.#inFlight.delete(a.key);
    }
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    // A timer's pass still under way (a sweep, a purge) ends before stop() does: the adapter may be closed next.
    await Promise.allSettled([...this.#passes]);
    this.#unsubscribe?.();
    this.#unsubscribe = null;
    this.#running = false;
  }

  /**
   * Stops gracefully on the first SIGINT or SIGTERM (or `signals`), in Node
   * and Deno, so in-flight jobs finish or are released instead of waiting
   * for their leases to expire. After the stop, `onStopped` runs; without
   * one, the signal is delivered again so the process ends as it would have
   * (unless the application listens to it too). A second signal during the
   * stop gets the runtime's default behaviour. Returns an unsubscribe function.
   */
  stopOnSignals(options: { signals?: readonly ShutdownSignal[]; onStopped?: (signal: ShutdownSignal) => unknown } = {}): () => void {
    checkKeys(options, ["signals", "onStopped"], "stopOnSignals(options)");
    const signals = options.signals ?? SHUTDOWN_SIGNALS;
    if (!Array.isArray(signals) || signals.length === 0 || signals.some((s) => typeof s !== "string" || !/^SIG[A-Z0-9]+$/.test(s))) {
      throw new InvalidArgumentError(`signals must be a non-empty list of signal names like "SIGTERM", got ${shown(signals)}`);
    }
    return onceOnSignals(signals, (signal) => {
      this.#log.warn(`${signal} received, stopping (in-flight jobs finish or are released)`);
      void this.stop()
        .then(() => (options.onStopped ? options.onStopped(signal) : reraise(signal)))
        .catch((error) => this.#emit({ type: "error", error: error as Error, operation: "release" }));
    });
  }

  async #claimLoop(): Promise<void> {
    let failures = 0;
    while (!this.#stopping) {
      this.#startBuffered();
      const prefetch = this.#prefetch();
      const lowWater = Math.floor(prefetch / 2);
      const room = this.#concurrency + prefetch - this.#held(prefetch);
      let full = false;
      if (room > 0 && this.#buffer.length <= lowWater) {
        const claimed = await this.#claim(room);
        if (!Array.isArray(claimed)) {
          const pause = errorBackoffDelay(++failures, ERROR_BACKOFF_BASE_MS, ERROR_BACKOFF_MAX_MS, this.#docket.random);
          this.#emit({ type: "error", error: claimed.error, operation: "claim", retryInMs: pause });
          await this.#sleep(pause, false);
          continue;
        }
        failures = 0;
        for (const record of claimed) this.#buffer.push(this.#track(record));
        this.#startBuffered();
        full = claimed.length === room;
      }
      if (this.#stopping) break;
      // A full batch means more may be waiting: a finishing job wakes the loop once the buffer runs low.
      if (!full || this.#buffer.length > lowWater || this.#held(prefetch) >= this.#concurrency + prefetch) {
        await this.#sleep(this.#pollMs, true);
      }
      // A synchronous driver (SQLite) resolves every statement without a macrotask: yield, so timers run.
      else await nextTurn();
    }
  }

  /** The docket's payload limit, or maxPayloadBytes while the database's limit cannot be read. */
  #payloadLimit(): Promise<number> {
    return this.#docket.payloadLimit().catch(() => this.#docket.maxPayloadBytes);
  }

  /**
   * The attempts that count against the claim loop's room: every one held
   * (buffered, running, retrying its outcome's write) except up to
   * `prefetch` finished ones whose outcomes are queued or being written, so
   * the next claim overlaps their write. A worker holds at most
   * concurrency + 2 × prefetch leases. On a blocking adapter every held
   * attempt counts: claims and outcome writes take turns.
   */
  #held(prefetch: number): number {
    return this.#overlap ? this.#inFlight.size - Math.min(this.#recording, prefetch) : this.#inFlight.size;
  }

  /**
   * The buffer size now: the fixed one, or AUTO_PREFETCH_MS of work at the
   * smoothed finishing rate, within [concurrency, AUTO_PREFETCH_MAX] (or
   * AUTO_PREFETCH_MAX_BLOCKING on a blocking adapter). A rate
   * sample spans RATE_WINDOW_MS, or less once RATE_SAMPLE_JOBS jobs finished
   * in it: a backlog of fast jobs reaches its full buffer within its first
   * few claims, while slow jobs are measured over the whole window.
   */
  #prefetch(): number {
    if (this.#fixedPrefetch !== null) return this.#fixedPrefetch;
    const now = this.#docket.clock.now();
    const rate = this.#rate;
    if (rate.at === 0) {
      this.#rate = { perMs: 0, at: now, finished: this.#finished, sampled: false };
    } else {
      const elapsed = now - rate.at;
      const count = this.#finished - rate.finished;
      if (elapsed >= RATE_WINDOW_MS || (count >= RATE_SAMPLE_JOBS && elapsed > 0)) {
        const recent = count / elapsed;
        this.#rate = { perMs: rate.sampled ? (rate.perMs + recent) / 2 : recent, at: now, finished: this.#finished, sampled: true };
      }
    }
    const max = this.#overlap ? AUTO_PREFETCH_MAX : AUTO_PREFETCH_MAX_BLOCKING;
    return Math.min(max, Math.max(this.#concurrency, Math.round(this.#rate.perMs * AUTO_PREFETCH_MS)));
  }

  /** Starts buffered jobs, in claim order, while handlers are free. */
  #startBuffered(): void {
    while (this.#active < this.#concurrency && this.#buffer.length > 0 && !this.#stopping) this.#run(this.#buffer.shift()!);
  }

  /** Asks the next claim to admit due scheduled jobs at `at` (a retry this worker scheduled), waking the loop then. */
  #requestStage(at: number): void {
    if (this.#stopping || !this.#running) return;
    if (this.#stageTimer && this.#stageTimer.at <= at) return;
    if (this.#stageTimer) clearTimeout(this.#stageTimer.timer);
    const delay = Math.max(0, at - this.#docket.clock.now());
    const timer = setTimeout(() => {
      this.#stageTimer = null;
      this.#stageRequested = true;
      this.#signalWake();
    }, delay);
    this.#stageTimer = { at, timer };
  }

  /** The claimed jobs, or what the claim threw. */
  async #claim(limit: number): Promise<JobRecord[] | { error: Error }> {
    const now = this.#docket.clock.now();
    const stage = this.#stageRequested || now - this.#lastStage >= this.#pollMs;
    try {
      const claimed = await this.#docket.adapter.claim({
        queues: this.#queues,
        tasks: this.#fallback ? undefined : [...this.#handlers.keys()],
        limit,
        now,
        leaseToken: crypto.randomUUID(),
        leaseExpiresAt: now + this.#leaseMs,
        worker: this.name,
        stage,
      });
      if (stage) {
        this.#lastStage = now;
        this.#stageRequested = false;
      }
      return claimed;
    } catch (error) {
      return { error: error as Error };
    }
  }

  /** Sleeps up to `ms`; a stop ends it at once, and so does a wake-up when `wakeable`. */
  #sleep(ms: number, wakeable: boolean): Promise<void> {
    if (wakeable && this.#wakePending) {
      this.#wakePending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(timer);
        self.#wake = null;
        resolve();
      }
      this.#wake = wakeable ? done : () => (this.#stopping ? done() : undefined);
    });
  }

  #signalWake(): void {
    if (this.#wake) this.#wake();
    else this.#wakePending = true;
  }

  /**
   * Wakes the claim loop on the next macrotask turn (once, however often it
   * is called meanwhile): a handler that frees its slot must not resume the
   * loop inside its own turn, or a synchronous driver (SQLite) would chain
   * claims and handlers without ever letting timers run.
   */
  #wakeNextTurn(): void {
    if (this.#wakeScheduled) return;
    this.#wakeScheduled = true;
    void nextTurn().then(() => {
      this.#wakeScheduled = false;
      this.#signalWake();
    });
  }

  /** A claimed job's attempt, buffered and holding its lease from now on. */
  #track(record: JobRecord): Attempt {
    const attempt: Attempt = {
      record,
      key: attemptKey(record),
      controller: new LazyAbort(),
      done: Promise.resolve(),
      phase: "buffered",
      leaseExpiresAt: record.leaseExpiresAt ?? 0,
    };
    this.#inFlight.set(attempt.key, attempt);
    return attempt;
  }

  #run(attempt: Attempt): void {
    const key = attempt.key;
    if (this.#inFlight.get(key) !== attempt) return; // lost while buffered: reported at the heartbeat
    attempt.phase = "running";
    this.#active++;
    let freed = false;
    // The handler's slot frees when the handler settles; its outcome is written in a later batch.
    const free = () => {
      if (freed) return;
      freed = true;
      this.#active--;
      this.#finished++;
      this.#startBuffered();
      // The buffer ran low: claim more now, while this outcome is written.
      if (this.#overlap && this.#buffer.length <= Math.floor(this.#prefetch() / 2)) this.#wakeNextTurn();
    };
    attempt.done = this.#execute(attempt, free).finally(() => {
      this.#inFlight.delete(key);
      free();
      // On a blocking adapter the claim waits for the next turn, so timers run between the outcome write and it.
      if (this.#buffer.length <= Math.floor(this.#prefetch() / 2)) this.#overlap ? this.#signalWake() : this.#wakeNextTurn();
    });
  }

  async #execute(attempt: Attempt, free: () => void): Promise<void> {
    const { record, controller } = attempt;
    const job = toJob(record);
    this.#emit({ type: "started", job });
    const ran = await this.#runHandler(job, controller, record);
    free();
    if (!this.#inFlight.has(attempt.key)) return; // lost at a heartbeat: reported there
    attempt.phase = "settling";
    const outcome: Outcome =
      "result" in ran
        ? { kind: "succeeded", result: ran.result }
        : this.#stopping && controller.aborted && !(controller.reason instanceof JobTimeoutError)
          ? { kind: "released" }
          : { kind: "failed", error: ran.failure, timedOut: ran.timedOut === true };
    await this.#record(attempt, outcome);
  }

  /** Queues the attempt's outcome for the next batched write; resolves once it is recorded (or given up). */
  #record(attempt: Attempt, outcome: Outcome): Promise<void> {
    attempt.phase = "settling";
    this.#recording++;
    return new Promise((written) => {
      this.#pending.push({ attempt, outcome, written });
      this.#scheduleFlush();
    });
  }

  /** Starts a batched write on the next macrotask turn (outcomes of this turn join it), unless one is scheduled or MAX_FLUSHES are in flight (the last to finish starts the next). */
  #scheduleFlush(): void {
    if (this.#flushScheduled || this.#flushes >= MAX_FLUSHES || this.#pending.length === 0) return;
    this.#flushScheduled = true;
    void nextTurn().then(() => {
      this.#flushScheduled = false;
      void this.#flush();
    });
  }

  /**
   * Writes every queued outcome in one `settle` call (outcomes that arrive
   * meanwhile form the next batch, up to MAX_FLUSHES batches in flight).
   * When the call throws, each outcome is retried on its own
   * (`#writeOutcome`), which also finds one that committed before the error.
   */
  async #flush(): Promise<void> {
    this.#flushes++;
    try {
      await this.#flushBatch(this.#pending.splice(0));
    } finally {
      this.#flushes--;
      this.#scheduleFlush();
    }
  }

  async #flushBatch(batch: { attempt: Attempt; outcome: Outcome; written: () => void }[]): Promise<void> {
    const now = this.#docket.clock.now();
    const items = batch.map(({ attempt, outcome }) => this.#settleItem(attempt.record, outcome, now));
    let results: (SettledJob | null)[];
    try {
      results = await this.#docket.adapter.settle({ items });
    } catch (error) {
      this.#recording -= batch.length;
      await Promise.all(batch.map((p) => this.#writeOutcome(p.attempt, p.outcome, error as Error).then(p.written)));
      return;
    }
    this.#recording -= batch.length;
    batch.forEach((p, i) => {
      this.#inFlight.delete(p.attempt.key);
      const settled = results[i] ?? null;
      if (settled) {
        this.#emitOutcome({ ...p.attempt.record, ...settled }, p.outcome);
        p.written();
      } else void this.#reportLost([p.attempt.record], null).then(p.written);
    });
  }

  /** What the adapter writes for `outcome` of the attempt claimed as `record`, at `now`. */
  #settleItem(record: JobRecord, outcome: Outcome, now: number): SettleItem {
    const { id, concurrencyKey } = record;
    const leaseToken = record.leaseToken!;
    if (outcome.kind === "succeeded") return { kind: "complete", id, leaseToken, now, concurrencyKey, result: outcome.result };
    if (outcome.kind === "released") return { kind: "release", id, leaseToken, now, concurrencyKey };
    const plan = this.#docket.planFailure(record, now);
    return { kind: "fail", id, leaseToken, now, concurrencyKey, error: outcome.error, retryAt: plan.kind === "retry" ? plan.runAt : null };
  }

  /**
   * Runs the handler under the job's timeout: its return value as JSON text
   * (null for undefined), or the failure reason (a throw, a timeout, a value
   * that cannot be stored). Never throws.
   */
  async #runHandler(job: Job, controller: LazyAbort, record: JobRecord): Promise<{ result: string | null } | { failure: string; timedOut?: true }> {
    const handler = this.#handlers.get(job.task) ?? this.#fallback;
    if (!handler) return { failure: `no handler for task ${JSON.stringify(job.task)} in this worker` };
    const timeoutMs = job.timeoutMs ?? this.#timeoutMs;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let timeout: JobTimeoutError | null = null;
    const progress = async (value: unknown): Promise<void> => {
      const text = serializePayload(value, await this.#payloadLimit());
      const fence = { id: record.id, leaseToken: record.leaseToken!, now: this.#docket.clock.now() };
      if (!(await this.#docket.adapter.setProgress({ ...fence, progress: text }))) throw new LeaseLostError(record.id, "progress not recorded");
    };
    try {
      const context: JobContext = {
        job,
        get signal() {
          return controller.signal;
        },
        progress,
      };
      const run = Promise.resolve().then(() => handler(job.payload, context));
      let value: unknown;
      if (timeoutMs === null) {
        value = await run;
      } else {
        const timedOut = new Promise<never>((_, reject) => {
          timer = setTimeout(() => {
            timeout = new JobTimeoutError(timeoutMs);
            controller.abort(timeout);
            reject(timeout);
          }, timeoutMs);
        });
        run.catch(() => undefined); // a handler that fails after its timeout is already recorded
        value = await Promise.race([run, timedOut]);
      }
      try {
        return { result: value === undefined ? null : serializePayload(value, await this.#payloadLimit()) };
      } catch (error) {
        return { failure: `the handler's return value cannot be stored as its result: ${(error as Error).message}` };
      }
    } catch (thrown) {
      // Compared by identity: `instanceof` on a thrown Proxy runs its traps.
      if (timeout !== null && thrown === timeout) return { failure: (timeout as JobTimeoutError).message, timedOut: true };
      return { failure: describeThrown(thrown) };
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Writes the attempt's outcome, fenced by its lease. A write that throws is
   * retried with backoff while the lease can still be ours (heartbeats keep
   * it meanwhile); a write that matches nothing means the lease was lost.
   */
  async #writeOutcome(attempt: Attempt, outcome: Outcome, firstError?: Error): Promise<void> {
    const { record } = attempt;
    const operation = outcome.kind === "succeeded" ? "complete" : outcome.kind === "failed" ? "fail" : "release";
    for (let failures = 0; ; ) {
      if (failures === 0 && firstError !== undefined) {
        failures = 1;
        if (!(await this.#pauseAfterFailure(attempt, firstError, failures, operation))) return;
      }
      const now = this.#docket.clock.now();
      try {
        const [settled] = await this.#docket.adapter.settle({ items: [this.#settleItem(record, outcome, now)] });
        let result: JobRecord | null = settled ? { ...record, ...settled } : null;
        // After a failed try, the earlier write may have committed without its answer reaching us.
        if (result === null && failures > 0) result = await this.#committedEarlier(record, outcome);
        this.#inFlight.delete(attempt.key);
        if (result) this.#emitOutcome(result, outcome);
        else await this.#reportLost([record], null);
        return;
      } catch (error) {
        failures++;
        if (!(await this.#pauseAfterFailure(attempt, error as Error, failures, operation))) return;
      }
    }
  }

  /**
   * After the `failures`-th failed outcome write: waits the backoff pause and
   * returns true while the lease can still be ours; else reports the job
   * lost and returns false.
   */
  async #pauseAfterFailure(attempt: Attempt, error: Error, failures: number, operation: "complete" | "fail" | "release"): Promise<boolean> {
    const { record } = attempt;
    attempt.phase = "retrying";
    const pause = errorBackoffDelay(failures, ERROR_BACKOFF_BASE_MS, ERROR_BACKOFF_MAX_MS, this.#docket.random);
    const ours = this.#inFlight.has(attempt.key) && !this.#abandon;
    if (!ours || this.#docket.clock.now() + pause >= attempt.leaseExpiresAt) {
      this.#emit({ type: "error", error, operation });
      this.#inFlight.delete(attempt.key);
      this.#emit({ type: "lost", job: toJob(record), reason: `could not record the outcome (${operation}) before the lease ended` });
      return false;
    }
    this.#emit({ type: "error", error, operation, retryInMs: pause });
    await new Promise((r) => setTimeout(r, pause));
    return true;
  }

  /** The job as this attempt's outcome left it, if the job shows that outcome; else null. */
  async #committedEarlier(record: JobRecord, outcome: Outcome): Promise<JobRecord | null> {
    const now = await this.#docket.adapter.get({ id: record.id });
    if (!now || now.leaseToken !== null || now.updatedAt < record.updatedAt) return null;
    if (outcome.kind === "succeeded") return now.state === "succeeded" && now.attempt === record.attempt ? now : null;
    if (outcome.kind === "released") return now.state === "ready" && now.attempt === record.attempt - 1 ? now : null;
    return (now.state === "dead" || now.state === "scheduled") && now.attempt === record.attempt && now.lastError === outcome.error ? now : null;
  }

  /** Reports the outcome the attempt's write recorded (`result`: the job as it left it), and logs a failure. */
  #emitOutcome(result: JobRecord, outcome: Outcome): void {
    const job = toJob(result);
    if (result.state === "scheduled") this.#requestStage(result.runAt);
    if (outcome.kind === "succeeded") this.#emit({ type: "succeeded", job });
    else if (outcome.kind === "released") this.#emit({ type: "released", job });
    else {
      const dead = result.state === "dead";
      const how = `${attemptLabel(job)} failed${outcome.timedOut ? " (timeout)" : ""}`;
      if (dead) this.#log.error(`${how}, dead: ${oneLine(outcome.error)}`);
      else this.#log.warn(`${how}, retry in ${Math.max(0, result.runAt - this.#docket.clock.now())} ms: ${oneLine(outcome.error)}`);
      this.#emit({ type: dead ? "dead" : "retry", job, error: outcome.error });
    }
  }

  /**
   * Reports the attempts claimed as `records` lost. Without a `reason`, reads
   * each job (the first LOST_READS_MAX) to tell a cancel from a reclaim.
   * Never throws.
   */
  async #reportLost(records: readonly JobRecord[], reason: string | null): Promise<void> {
    const reasons = reason !== null ? records.map(() => reason) : await Promise.all(records.map((r, i) => (i < LOST_READS_MAX ? this.#lossReason(r) : LOST_UNKNOWN)));
    records.forEach((record, i) => this.#emit({ type: "lost", job: toJob(record), reason: reasons[i]! }));
  }

  /** Why the attempt claimed as `record` no longer holds its lease, as the job now shows it. Never throws. */
  async #lossReason(record: JobRecord): Promise<string> {
    try {
      const now = await this.#docket.adapter.get({ id: record.id });
      if (now === null) return "lease lost (the job was deleted)";
      if (now.state === "cancelled") return LOST_CANCELLED;
      // Not cancelled, and no longer under this attempt's lease: a sweep found it expired.
      return now.leaseToken === record.leaseToken ? LOST_UNKNOWN : LOST_RECLAIMED;
    } catch {
      return LOST_UNKNOWN;
    }
  }

  /** Extends the lease of every attempt whose handler has not settled, and of every outcome write being retried. */
  async #heartbeatAll(): Promise<void> {
    const now = this.#docket.clock.now();
    const leaseExpiresAt = now + this.#leaseMs;
    const attempts = [...this.#inFlight.values()].filter((a) => a.phase !== "settling");
    if (attempts.length === 0) return;
    let kept: Set<string>;
    try {
      const items = attempts.map((a) => ({ id: a.record.id, leaseToken: a.record.leaseToken! }));
      kept = new Set((await this.#docket.adapter.extendLeases({ items, now, leaseExpiresAt })).map((k) => `${k.id}:${k.leaseToken}`));
    } catch (error) {
      this.#emit({ type: "error", error: error as Error, operation: "heartbeat" });
      return;
    }
    const missed = new Set<Attempt>();
    for (const attempt of attempts) {
      if (kept.has(attempt.key)) attempt.leaseExpiresAt = leaseExpiresAt;
      else missed.add(attempt);
    }
    // Lost only while the handler still runs (or waits in the buffer): a completion that committed
    // while this heartbeat was in flight also makes it miss, and a retried write finds out itself.
    await this.#abortLost((a) => missed.has(a), null);
  }

  /**
   * Between heartbeats: reads whether the running and buffered attempts
   * still hold their leases (one statement), so a handler whose job another
   * process cancelled (or a sweeper reclaimed) sees its signal abort within
   * min(pollMs, 1 s), and such a buffered job is dropped before it starts.
   */
  async #checkLeases(): Promise<void> {
    const running = [...this.#inFlight.values()].filter((a) => a.phase === "running" || a.phase === "buffered");
    if (running.length === 0) return;
    let held: Set<string>;
    try {
      const items = running.map((a) => ({ id: a.record.id, leaseToken: a.record.leaseToken! }));
      held = new Set((await this.#docket.adapter.heldLeases({ items })).map((k) => `${k.id}:${k.leaseToken}`));
    } catch (error) {
      this.#emit({ type: "error", error: error as Error, operation: "heartbeat" });
      return;
    }
    const lost = new Set(running.filter((a) => !held.has(a.key)));
    await this.#abortLost((a) => lost.has(a), null);
  }

  /**
   * Aborts the handlers of the running attempts `which` selects (a buffered
   * one never starts), at once, and reports them lost: their leases are gone.
   * `reason` null: not known here; read from the jobs before reporting.
   */
  async #abortLost(which: (attempt: Attempt) => boolean, reason: string | null): Promise<void> {
    const lost: JobRecord[] = [];
    for (const attempt of [...this.#inFlight.values()]) {
      if ((attempt.phase !== "running" && attempt.phase !== "buffered") || !which(attempt)) continue;
      attempt.controller.abort(new Error(`lease lost: the job was ${reason === LOST_CANCELLED ? "cancelled" : "cancelled or reclaimed"}`));
      this.#inFlight.delete(attempt.key);
      lost.push(attempt.record);
    }
    if (lost.length > 0) await this.#reportLost(lost, reason);
  }

  /** Runs a timer's pass, tracked until it settles (stop() waits for it). */
  #pass(run: () => Promise<void>): void {
    const pass: Promise<void> = run()
      .catch(() => undefined)
      .finally(() => this.#passes.delete(pass));
    this.#passes.add(pass);
  }

  /** The sweep: expired leases every tick; finished jobs past their retention, and stranded keys, at most every PURGE_EVERY_MS. */
  async #reclaim(): Promise<void> {
    try {
      await this.#docket.reclaimExpired();
    } catch (error) {
      this.#emit({ type: "error", error: error as Error, operation: "reclaim" });
    }
    const now = this.#docket.clock.now();
    if (now - this.#lastPurge < PURGE_EVERY_MS) return;
    this.#lastPurge = now;
    try {
      await this.#docket.purgeFinished();
    } catch (error) {
      this.#emit({ type: "error", error: error as Error, operation: "purge" });
    }
    try {
      for (const key of (await this.#docket.repairKeys()).repaired) this.#emit({ type: "keyRepaired", key });
    } catch (error) {
      this.#emit({ type: "error", error: error as Error, operation: "repair" });
    }
  }

  #emit(event: WorkerEvent): void {
    if (event.type === "error") {
      const retry = event.retryInMs === undefined ? "" : ` (retrying in ${event.retryInMs} ms)`;
      this.#log.warn(`${event.operation} failed${retry}: ${oneLine(messageOf(event.error))}`);
    } else if (event.type === "keyRepaired") {
      this.#log.warn(`concurrency key ${oneLine(JSON.stringify(event.key))} had blocked jobs and free slots; promoted them`);
    } else if (event.type === "lost") {
      if (event.reason === LOST_CANCELLED) this.#log.info(`${attemptLabel(event.job)} cancelled`);
      else this.#log.warn(`${attemptLabel(event.job)} lost: ${event.reason}`);
    }
    try {
      this.#onEvent(event);
    } catch {
      // An observer's failure must not affect the job.
    }
    // Built only when the docket has a listener for it: a worker without observers pays two map lookups per event.
    if (this.#docket.listens(docketTypeOf(event))) this.#docket.publish(toDocketEvent(event, this.#docket.clock.now()));
  }
}

/** A worker event's type on the docket-level stream (`retry` is `retried` there). */
function docketTypeOf(event: WorkerEvent): DocketEvent["type"] {
  return event.type === "retry" ? "retried" : event.type;
}

/** The docket-level form of a worker event. */
function toDocketEvent(event: WorkerEvent, at: number): DocketEvent {
  if (event.type === "retry") return { type: "retried", at, job: event.job, error: event.error };
  return { ...event, at };
}

/** The abort reason of a handler that ran past its timeout. */
export class JobTimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`attempt timed out after ${timeoutMs} ms (timeoutMs)`);
    this.name = "JobTimeoutError";
  }
}

/** One attempt's identity: its job and the lease token its claim stamped. */
function attemptKey(record: JobRecord): string {
  return `${record.id}:${record.leaseToken}`;
}

/** A name unique enough to tell workers apart: the process id where there is one, and 6 random hex digits. */
function defaultWorkerName(): string {
  const pid = (globalThis as { process?: { pid?: unknown } }).process?.pid;
  const random = crypto.randomUUID().slice(0, 6);
  return typeof pid === "number" ? `pid-${pid}-${random}` : `w-${random}`;
}
