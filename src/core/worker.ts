import type { Docket, TaskMap } from "./docket.ts";
import { DocketError, InvalidArgumentError } from "./errors.ts";
import { toJob, type Job, type JobRecord } from "./job.ts";
import { validateInteger, validateName } from "./validate.ts";

/** What a handler gets besides its payload. */
export interface JobContext<P = unknown> {
  job: Job<P>;
  /**
   * Aborted when the worker stops (graceful shutdown), when the job's lease
   * is lost (cancelled, or reclaimed after missed heartbeats). A handler
   * should stop soon after; whatever it returns then is not recorded.
   */
  signal: AbortSignal;
}

export type Handler<P> = (payload: P, ctx: JobContext<P>) => unknown | Promise<unknown>;

/** Emitted only by the winner of a transition: each fires at most once per attempt. */
export type WorkerEvent =
  | { type: "started"; job: Job }
  | { type: "succeeded"; job: Job }
  | { type: "retry"; job: Job; error: string }
  | { type: "dead"; job: Job; error: string }
  | { type: "released"; job: Job }
  | { type: "lost"; job: Job; reason: string }
  | { type: "error"; error: DocketError | Error };

export interface WorkerOptions<T extends TaskMap> {
  handlers: { [K in keyof T]?: Handler<T[K]> };
  /** Queues to take jobs from. Default: the docket's default queue. */
  queues?: string[];
  /** Handlers running at once in this worker. Default 10. */
  concurrency?: number;
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
  /** Observer of transitions this worker won, and of errors it survived. Must not throw. */
  onEvent?: (event: WorkerEvent) => void;
}

interface InFlight {
  record: JobRecord;
  controller: AbortController;
  done: Promise<void>;
  /** The handler returned; its outcome is being written. Heartbeats leave it alone. */
  settling: boolean;
}

/**
 * Runs handlers for claimed jobs. Guarantees:
 * - a job is run only after its claim committed, under a lease this worker
 *   heartbeats; every write about it is fenced by that lease;
 * - a handler that throws anything (or returns a rejected promise) is a
 *   failed attempt with the reason stored, never a crashed worker;
 * - a job whose task has no handler here is failed with that reason;
 * - `stop()` aborts in-flight handlers, waits up to `shutdownTimeoutMs`, then
 *   releases unfinished jobs back to ready (not counted as an attempt).
 */
export class Worker<T extends TaskMap = TaskMap> {
  readonly #docket: Docket<T>;
  readonly #handlers: Map<string, Handler<unknown>>;
  readonly #queues: string[];
  readonly #concurrency: number;
  readonly #leaseMs: number;
  readonly #heartbeatMs: number;
  readonly #pollMs: number;
  readonly #reclaimMs: number;
  readonly #shutdownTimeoutMs: number;
  readonly #onEvent: (event: WorkerEvent) => void;
  readonly #inFlight = new Map<number, InFlight>();
  #running = false;
  #stopping = false;
  #loop: Promise<void> | null = null;
  #wake: (() => void) | null = null;
  #wakePending = false;
  #timers: ReturnType<typeof setInterval>[] = [];

  constructor(docket: Docket<T>, options: WorkerOptions<T>) {
    if (!options || typeof options.handlers !== "object" || options.handlers === null) {
      throw new InvalidArgumentError("worker({ handlers }) needs a handlers object");
    }
    this.#docket = docket;
    this.#handlers = new Map();
    for (const [task, handler] of Object.entries(options.handlers)) {
      if (handler === undefined) continue;
      if (typeof handler !== "function") throw new InvalidArgumentError(`handler for ${JSON.stringify(task)} must be a function`);
      this.#handlers.set(task, handler as Handler<unknown>);
    }
    this.#queues = (options.queues ?? [docket.defaultQueue]).map((q) => validateName(q, "queue"));
    if (this.#queues.length === 0) throw new InvalidArgumentError("queues must name at least one queue");
    this.#concurrency = validateInteger(options.concurrency ?? 10, "concurrency", 1, 10_000);
    this.#leaseMs = validateInteger(options.leaseMs ?? 30_000, "leaseMs", 50, 24 * 3600_000);
    this.#heartbeatMs = validateInteger(options.heartbeatMs ?? Math.floor(this.#leaseMs / 3), "heartbeatMs", 10, this.#leaseMs - 1);
    this.#pollMs = validateInteger(options.pollMs ?? 1000, "pollMs", 1, 3600_000);
    this.#reclaimMs = validateInteger(options.reclaimMs ?? Math.floor(this.#leaseMs / 2), "reclaimMs", 10, 24 * 3600_000);
    this.#shutdownTimeoutMs = validateInteger(options.shutdownTimeoutMs ?? 10_000, "shutdownTimeoutMs", 0, 24 * 3600_000);
    this.#onEvent = options.onEvent ?? (() => undefined);
  }

  /** Jobs currently being handled by this worker. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Starts claiming. Idempotent while running. */
  start(): Promise<void> {
    if (this.#running) return Promise.resolve();
    this.#running = true;
    this.#stopping = false;
    this.#timers = [
      setInterval(() => void this.#heartbeatAll(), this.#heartbeatMs),
      setInterval(() => void this.#reclaim(), this.#reclaimMs),
    ];
    this.#loop = this.#claimLoop();
    return Promise.resolve();
  }

  /**
   * Graceful stop: no new claims; in-flight handlers are aborted and get up
   * to `timeoutMs` to finish (their results are recorded as usual); jobs
   * still running after that are released back to ready. Resolves when no
   * job of this worker is left running.
   */
  async stop(options: { timeoutMs?: number } = {}): Promise<void> {
    if (!this.#running) return;
    const timeoutMs = validateInteger(options.timeoutMs ?? this.#shutdownTimeoutMs, "timeoutMs", 0, 24 * 3600_000);
    this.#stopping = true;
    this.#signalWake();
    await this.#loop;
    for (const f of this.#inFlight.values()) f.controller.abort(new Error("worker stopping"));
    const all = Promise.all([...this.#inFlight.values()].map((f) => f.done));
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([all, new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
    for (const f of [...this.#inFlight.values()]) await this.#release(f.record);
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    this.#running = false;
  }

  async #claimLoop(): Promise<void> {
    while (!this.#stopping) {
      const free = this.#concurrency - this.#inFlight.size;
      let full = false;
      if (free > 0) {
        const claimed = await this.#claim(free);
        for (const record of claimed) this.#run(record);
        full = claimed.length === free;
      }
      if (this.#stopping) break;
      // A full batch means more may be waiting: a finishing job wakes the loop to claim again.
      if (!full || this.#inFlight.size >= this.#concurrency) await this.#sleep(this.#pollMs);
    }
  }

  async #claim(limit: number): Promise<JobRecord[]> {
    const now = this.#docket.clock.now();
    try {
      return await this.#docket.adapter.claim({
        queues: this.#queues,
        limit,
        now,
        leaseToken: crypto.randomUUID(),
        leaseExpiresAt: now + this.#leaseMs,
      });
    } catch (error) {
      this.#emit({ type: "error", error: error as Error });
      return [];
    }
  }

  /** Sleeps up to `ms`; a wake-up signalled before or during the sleep ends it at once. */
  #sleep(ms: number): Promise<void> {
    if (this.#wakePending) {
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
      this.#wake = done;
    });
  }

  #signalWake(): void {
    if (this.#wake) this.#wake();
    else this.#wakePending = true;
  }

  #run(record: JobRecord): void {
    const controller = new AbortController();
    const entry: InFlight = { record, controller, done: Promise.resolve(), settling: false };
    this.#inFlight.set(record.id, entry);
    entry.done = this.#execute(entry).finally(() => {
      this.#inFlight.delete(record.id);
      this.#signalWake();
    });
  }

  async #execute(entry: InFlight): Promise<void> {
    const { record, controller } = entry;
    const job = toJob(record);
    this.#emit({ type: "started", job });
    let failure: string | null = null;
    try {
      const handler = this.#handlers.get(record.task);
      if (!handler) throw new Error(`no handler for task ${JSON.stringify(record.task)} in this worker`);
      await handler(job.payload, { job, signal: controller.signal });
    } catch (thrown) {
      failure = describeThrown(thrown);
    }
    entry.settling = true;
    if (this.#inFlight.get(record.id) !== entry) return;
    const docket = this.#docket;
    const now = docket.clock.now();
    const fence = { id: record.id, leaseToken: record.leaseToken!, now };
    try {
      if (failure === null) {
        const done = await docket.adapter.complete(fence);
        this.#emitOutcome(done, record, { type: "succeeded" });
      } else if (this.#stopping && controller.signal.aborted) {
        // Interrupted by shutdown: hand the job back instead of spending an attempt.
        await this.#release(record);
      } else {
        const plan = docket.planFailure(record, now);
        const failed = await docket.adapter.fail({ ...fence, error: failure, retryAt: plan.kind === "retry" ? plan.runAt : null });
        this.#emitOutcome(failed, record, failed?.state === "dead" ? { type: "dead", error: failure } : { type: "retry", error: failure });
      }
    } catch (error) {
      this.#emit({ type: "error", error: error as Error });
    }
  }

  #emitOutcome(
    result: JobRecord | null,
    claimed: JobRecord,
    event: { type: "succeeded" } | { type: "retry" | "dead"; error: string },
  ): void {
    if (result) this.#emit({ ...event, job: toJob(result) } as WorkerEvent);
    else this.#emit({ type: "lost", job: toJob(claimed), reason: "lease no longer held (cancelled or reclaimed)" });
  }

  async #release(record: JobRecord): Promise<void> {
    try {
      const released = await this.#docket.adapter.release({ id: record.id, leaseToken: record.leaseToken!, now: this.#docket.clock.now() });
      this.#inFlight.delete(record.id);
      if (released) this.#emit({ type: "released", job: toJob(released) });
    } catch (error) {
      this.#emit({ type: "error", error: error as Error });
    }
  }

  async #heartbeatAll(): Promise<void> {
    const now = this.#docket.clock.now();
    for (const entry of [...this.#inFlight.values()]) {
      if (entry.controller.signal.aborted || entry.settling) continue;
      try {
        const kept = await this.#docket.adapter.heartbeat({
          id: entry.record.id,
          leaseToken: entry.record.leaseToken!,
          now,
          leaseExpiresAt: now + this.#leaseMs,
        });
        // Lost only if the job is still ours and its handler still running: a completion that
        // committed while this heartbeat was in flight also makes the heartbeat miss.
        if (!kept && !entry.settling && this.#inFlight.get(entry.record.id) === entry) {
          entry.controller.abort(new Error("lease lost: the job was cancelled or reclaimed"));
          this.#inFlight.delete(entry.record.id);
          this.#emit({ type: "lost", job: toJob(entry.record), reason: "lease lost at heartbeat" });
        }
      } catch (error) {
        this.#emit({ type: "error", error: error as Error });
      }
    }
  }

  async #reclaim(): Promise<void> {
    try {
      await this.#docket.reclaimExpired();
    } catch (error) {
      this.#emit({ type: "error", error: error as Error });
    }
  }

  #emit(event: WorkerEvent): void {
    try {
      this.#onEvent(event);
    } catch {
      // An observer's failure must not affect the job.
    }
  }
}

const MAX_ERROR_LENGTH = 8000;

/** A stored reason for anything a handler can throw, including non-Errors. */
export function describeThrown(thrown: unknown): string {
  let text: string;
  if (thrown instanceof Error) text = thrown.stack ?? `${thrown.name}: ${thrown.message}`;
  else if (thrown === undefined) text = "handler threw undefined";
  else if (typeof thrown === "string") text = thrown.length > 0 ? thrown : "handler threw an empty string";
  else {
    try {
      text = `handler threw ${typeof thrown}: ${JSON.stringify(thrown) ?? String(thrown)}`;
    } catch {
      text = `handler threw ${typeof thrown}`;
    }
  }
  return text.length > MAX_ERROR_LENGTH ? text.slice(0, MAX_ERROR_LENGTH) : text;
}
