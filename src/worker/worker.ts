/**
 * The public Worker: built from its options and a WorkerHost, it wires the
 * runtime's parts (producer, local buffer, executor, completer, lease
 * keeper, sweeps) and runs them between `start()` and `stop()`.
 */
import type { TaskMap, WorkerHost } from "./host.ts";
import { ClosedError, InvalidArgumentError } from "../core/errors.ts";
import { shown } from "../core/shown.ts";
import { onceOnSignals, reraise, SHUTDOWN_SIGNALS, STOPPABLE_SIGNALS, type ShutdownSignal } from "./signals.ts";
import { checkKeys, validateInteger } from "../core/validate.ts";
import type { Attempt, InFlight } from "./attempt.ts";
import { Completer } from "./completer.ts";
import { Emitter } from "./emitter.ts";
import { Executor } from "./executor.ts";
import { LEASE_CHECK_MAX_MS, LeaseKeeper } from "./lease-keeper.ts";
import { LocalBuffer } from "./local-buffer.ts";
import { PausedQueues } from "./paused-queues.ts";
import { oneLine, WorkerLog } from "./log.ts";
import { resolveOptions, type WorkerConfig, type WorkerOptions } from "./options.ts";
import { Producer } from "./producer.ts";
import { Registration } from "./registry.ts";
import { Lifecycle } from "./state.ts";
import { Sweeps } from "./sweeps.ts";
import { WorkerStoppingError } from "./abort-reasons.ts";

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
/** How often a worker holding buffered jobs reads whether their queues were paused elsewhere (ms; see #checkPauses). */
export const PAUSE_CHECK_MS = 1000;

export class Worker<T extends TaskMap = TaskMap> {
  readonly #host: WorkerHost;
  readonly #config: WorkerConfig;
  readonly #life = new Lifecycle();
  readonly #inFlight: InFlight = new Map();
  readonly #emitter: Emitter;
  readonly #buffer: LocalBuffer;
  readonly #producer: Producer;
  readonly #executor: Executor;
  readonly #completer: Completer;
  readonly #leases: LeaseKeeper;
  /** The queues this worker knows paused: their buffered jobs do not start (see #learnPause). */
  readonly #paused = new PausedQueues();
  readonly #sweeps: Sweeps;
  readonly #registration: Registration;
  /** Handled tasks registered to queues this worker does not take from: warned about at the first start. */
  #unreachable: readonly [task: string, queue: string][];
  /** Handlers the tasks registry does not name; warned about at the first start. */
  #unregistered: readonly string[];
  #loop: Promise<void> | null = null;
  #timers: ReturnType<typeof setInterval>[] = [];
  /** Timer passes under way (stop() waits for them). */
  readonly #passes = new Set<Promise<void>>();
  /** The kinds of lease write under way (see #leaseWrite). */
  readonly #leaseWrites = new Set<"heartbeat" | "renewal">();
  #renewFailedAt = Number.NEGATIVE_INFINITY;
  #unsubscribe: (() => void) | null = null;
  /** The stop under way, which a second stop() joins. */
  #stopping: Promise<void> | null = null;

  /** @internal Use `docket.worker(options)`: the host is the docket's. */
  constructor(host: WorkerHost, options: WorkerOptions<T>) {
    const config = resolveOptions(host, options);
    this.#host = host;
    this.#config = config;
    this.name = config.name;
    this.#unreachable = config.unreachable;
    this.#unregistered = config.unregistered;
    const overlap = host.adapter.blocking !== true;
    const life = this.#life;
    const inFlight = this.#inFlight;
    const emitter = (this.#emitter = new Emitter(host, config.onEvent, new WorkerLog(config.logger)));
    const buffer = (this.#buffer = new LocalBuffer({ concurrency: config.concurrency, fixed: config.fixedPrefetch, blocking: !overlap, now: () => host.clock.now() }));
    const leases = (this.#leases = new LeaseKeeper({ host, inFlight, emitter }, config.leaseMs));
    this.#sweeps = new Sweeps(host, emitter);
    this.#registration = new Registration(host, config, () => inFlight.size);
    const producer = (this.#producer = new Producer(
      {
        host,
        life,
        inFlight,
        buffer,
        emitter,
        startBuffered: () => this.#executor.startBuffered(),
        freeHandlers: () => this.#executor.free,
        recording: () => this.#completer.recording,
        claimed: (records, at) => {
          if (records.length > 0 && this.#paused.any) this.#paused.claimed(new Set(records.map((r) => r.queue)), at);
        },
      },
      {
        name: config.name,
        queues: config.queues,
        tasks: config.fallback ? undefined : [...config.handlers.keys()],
        concurrency: config.concurrency,
        leaseMs: config.leaseMs,
        pollMs: config.pollMs,
        overlap,
      },
    ));
    const completer = (this.#completer = new Completer({
      host,
      life,
      inFlight,
      emitter,
      requestStage: (at) => producer.requestStage(at),
      slotsFreed: () => producer.ready(false),
      childrenReleased: (children) => {
        for (const c of children) if (c.queue === null || config.queues.includes(c.queue)) producer.requestStage(c.runAt);
      },
      handOff: producer,
      reportLost: (records, reason) => leases.reportLost(records, reason),
    }));
    this.#executor = new Executor(
      { host, life, inFlight, buffer, emitter, wake: () => producer.wake(), wakeNextTurn: () => producer.wakeNextTurn(), idle: () => producer.idle, reserved: () => producer.reserved, record: (a, o) => completer.record(a, o), renew: (attempts) => this.#renew(attempts), paused: (queue) => this.#paused.paused(queue) },
      { handlers: config.handlers, fallback: config.fallback, timeoutMs: config.timeoutMs, concurrency: config.concurrency, leaseMs: config.leaseMs, overlap },
    );
  }

  /** This worker's name (WorkerOptions.name), stored with the jobs it claims. */
  readonly name: string;

  /** Jobs currently being handled by this worker. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Starts claiming. Idempotent while running. */
  start(): Promise<void> {
    if (this.#life.started) return Promise.resolve();
    if (this.#host.closed()) return Promise.reject(new ClosedError("this worker's docket"));
    this.#life.to("running");
    const config = this.#config;
    if (this.#unreachable.length > 0) {
      const tasks = this.#unreachable.map(([task, queue]) => `task ${JSON.stringify(task)} is registered to queue ${JSON.stringify(queue)}`).join("; ");
      const queues = config.queues.map((q) => JSON.stringify(q)).join(", ");
      this.#emitter.log.warn(oneLine(`${tasks}, which this worker does not take from (queues ${queues}): such jobs run here only if enqueued with one of its queues`, 1000));
      this.#unreachable = [];
    }
    if (this.#unregistered.length > 0) {
      const known = [...this.#host.taskQueues().keys()].map((t) => JSON.stringify(t)).join(", ");
      const named = this.#unregistered.map((t) => JSON.stringify(t)).join(", ");
      this.#unregistered = [];
      this.#emitter.log.warn(oneLine(`handlers for ${named}, which the docket's tasks registry does not name (it has ${known}): this docket enqueues no such job; a misspelt handler leaves its task's jobs unclaimed`, 1000));
    }
    this.#buffer.open();
    const register = () => this.#pass(() => this.#registration.put().catch((error) => this.#emitter.emit({ type: "error", error: error as Error, operation: "heartbeat" })));
    register();
    this.#timers = [
      setInterval(() => this.#heartbeat(), config.heartbeatMs),
      setInterval(register, config.heartbeatMs),
      setInterval(() => this.#pass(() => this.#sweeps.pass()), config.reclaimMs),
      setInterval(() => this.#pass(() => this.#leases.checkLeases()), Math.min(config.pollMs, LEASE_CHECK_MAX_MS)),
      setInterval(() => this.#pass(() => this.#checkPauses()), PAUSE_CHECK_MS),
    ];
    const host = this.#host;
    const unsubscribeErrors = host.adapter.onError?.((error) => this.#emitter.emit({ type: "error", error, operation: "connection" }));
    const unsubscribeEnqueues = host.onEnqueued((queues, due) => {
      if (queues === null || config.queues.some((q) => queues.has(q))) this.#producer.ready(due);
    });
    const unsubscribeScheduled = host.onScheduled((jobs) => {
      for (const j of jobs) if (config.queues.includes(j.queue)) this.#producer.requestStage(j.runAt);
    });
    const unsubscribeCancels = host.onCancelled((id) => this.#leases.cancelled(id));
    const unsubscribePauses = host.onPaused((queue, paused) => {
      if (config.queues.includes(queue)) this.#learnPause(queue, paused, host.clock.now());
    });
    const unsubscribeReady = host.adapter.onReady?.((notice) => {
      if (notice.queue !== null && !config.queues.includes(notice.queue)) return;
      this.#producer.ready(notice.due);
    });
    // docket.close() stops this worker before the adapter closes (its in-flight jobs finish or are released).
    const unsubscribeClose = host.onClose(() => this.stop());
    this.#unsubscribe = () => {
      unsubscribeClose();
      unsubscribeErrors?.();
      unsubscribeEnqueues();
      unsubscribeScheduled();
      unsubscribeCancels();
      unsubscribePauses();
      unsubscribeReady?.();
    };
    this.#loop = this.#producer.run();
    return Promise.resolve();
  }

  /**
   * Graceful stop: no new claims; in-flight handlers are aborted and get up
   * to `timeoutMs` to finish (their results are recorded as usual, and their
   * leases heartbeated meanwhile); jobs whose handler is still running after
   * that are released back to ready. Resolves when no job of this worker is
   * left running. A stop() while one is under way (a signal's, the docket's
   * close()) joins it, with its timeout: each job is released once.
   */
  stop(options: { timeoutMs?: number } = {}): Promise<void> {
    try {
      checkKeys(options, ["timeoutMs"], "stop(options)");
      const timeoutMs = validateInteger(options.timeoutMs ?? this.#config.shutdownTimeoutMs, "timeoutMs", 0, 24 * 3600_000);
      if (!this.#life.started) return Promise.resolve();
      return (this.#stopping ??= this.#stopSteps(timeoutMs).finally(() => (this.#stopping = null)));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async #stopSteps(timeoutMs: number): Promise<void> {
    const life = this.#life;
    if (life.state === "running") {
      life.to("draining");
      this.#buffer.drain();
    }
    this.#producer.wake();
    await this.#loop;
    // A hand-off under way may still add jobs to the buffer: they are released with the others.
    await this.#completer.handOffsSettled();
    this.#producer.clearStageTimer();
    // Jobs never started go back at once, in one batch.
    const buffered = this.#buffer.mode === "draining" ? this.#buffer.release().filter((a) => this.#inFlight.get(a.key) === a) : [];
    await Promise.all(buffered.map((a) => this.#completer.record(a, { kind: "released" })));
    for (const a of this.#inFlight.values()) a.controller.abort(new WorkerStoppingError());
    const all = Promise.all([...this.#inFlight.values()].map((a) => a.done));
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([all, new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
    // Outcome writes still retrying stop here; their leases expire and the sweep decides.
    if (life.state === "draining") life.to("releasing");
    // Each unfinished attempt leaves the in-flight set before any release is written: a handler that returns during
    // those writes finds its attempt gone and records nothing, and its ctx.transaction cannot commit (its job is
    // released: its outcome came too late). The releases go out together, so none waits out its lease behind the others.
    // An attempt whose outcome is being written (settling, retrying) is left to that write.
    const unfinished = [...this.#inFlight.values()].filter((a) => a.phase === "running");
    for (const a of unfinished) this.#inFlight.delete(a.key);
    await Promise.all(unfinished.map((a) => this.#completer.write(a, { kind: "released" })));
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    // A timer's pass still under way (a sweep, a purge) ends before stop() does: the adapter may be closed next.
    await Promise.allSettled([...this.#passes]);
    await this.#registration.remove().catch((error) => this.#emitter.emit({ type: "error", error: error as Error, operation: "heartbeat" }));
    this.#unsubscribe?.();
    this.#unsubscribe = null;
    if (life.state === "releasing") life.to("stopped");
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
    if (!Array.isArray(signals) || signals.length === 0 || signals.some((s) => !(STOPPABLE_SIGNALS as readonly unknown[]).includes(s))) {
      throw new InvalidArgumentError(`signals must be a non-empty list of ${STOPPABLE_SIGNALS.join(", ")}, got ${shown(signals)}`);
    }
    if (options.onStopped !== undefined && typeof options.onStopped !== "function") throw new InvalidArgumentError(`onStopped must be a function, got ${shown(options.onStopped)}`);
    return onceOnSignals(signals, (signal) => {
      this.#emitter.log.warn(`${signal} received, stopping (in-flight jobs finish or are released)`);
      void this.stop()
        .then(() => (options.onStopped ? options.onStopped(signal) : reraise(signal)))
        .catch((error) => this.#emitter.emit({ type: "error", error: error as Error, operation: "release" }));
    });
  }

  /**
   * The periodic heartbeat: skipped while the last one is still under way
   * (a slow database is not sent a pile of overlapping writes of the same
   * rows).
   */
  #heartbeat(): void {
    this.#leaseWrite("heartbeat", () => this.#leases.heartbeat());
  }

  /**
   * A heartbeat now of `attempts`, buffered ones whose leases are too short
   * to start (Executor.startBuffered). At most one under way; after a failed
   * one, none until heartbeatMs later (the periodic heartbeat carries on
   * meanwhile), so a database that refuses writes is not asked in a loop.
   */
  #renew(attempts: readonly Attempt[]): void {
    if (this.#life.state !== "running" || this.#host.clock.now() - this.#renewFailedAt < this.#config.heartbeatMs) return;
    this.#leaseWrite("renewal", async () => {
      const written = await this.#leases.extend(attempts);
      if (!written) this.#renewFailedAt = this.#host.clock.now();
      return written;
    });
  }

  /** Runs lease write `write` as a timer pass unless one of its `kind` is under way, then tries the buffer again (its leases fresh). */
  #leaseWrite(kind: "heartbeat" | "renewal", write: () => Promise<boolean>): void {
    if (this.#leaseWrites.has(kind)) return;
    this.#leaseWrites.add(kind);
    this.#pass(async () => {
      try {
        await write();
      } finally {
        this.#leaseWrites.delete(kind);
      }
      this.#executor.startBuffered();
    });
  }

  /**
   * Records what is known of `queue`'s pause as of `at` (PausedQueues); when
   * that makes it paused, every buffered job of it goes back to ready,
   * unstarted, its attempt not counted (`released`).
   */
  #learnPause(queue: string, paused: boolean, at: number): void {
    if (!this.#paused.learn(queue, paused, at) || this.#buffer.mode !== "open") return;
    for (const attempt of this.#buffer.remove((a) => a.record.queue === queue)) {
      if (this.#inFlight.get(attempt.key) === attempt) void this.#completer.record(attempt, { kind: "released" });
    }
    this.#producer.wake();
  }

  /**
   * While jobs are buffered, reads the stored controls (one read) and learns
   * from them which of this worker's queues are paused: a pause made by
   * another docket reaches the buffer within PAUSE_CHECK_MS. Never rejects.
   */
  async #checkPauses(): Promise<void> {
    if (this.#buffer.length === 0 && !this.#paused.any) return;
    const at = this.#host.clock.now();
    let queues: readonly { queue: string; paused: boolean }[];
    try {
      queues = (await this.#host.adapter.listControls()).queues;
    } catch (error) {
      this.#emitter.emit({ type: "error", error: error as Error, operation: "heartbeat" });
      return;
    }
    const paused = new Set(queues.filter((q) => q.paused).map((q) => q.queue));
    for (const queue of this.#config.queues) this.#learnPause(queue, paused.has(queue), at);
  }

  /** Runs a timer's pass, tracked until it settles (stop() waits for it). */
  #pass(run: () => Promise<void>): void {
    const pass: Promise<void> = run()
      .catch(() => undefined)
      .finally(() => this.#passes.delete(pass));
    this.#passes.add(pass);
  }
}
