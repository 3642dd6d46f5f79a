/**
 * The executor: runs one attempt — the handler with its context (signal,
 * progress, durable steps), under the job's timeout, its result serialized or its failure
 * described — and keeps at most `concurrency` handlers running, feeding free
 * slots from the local buffer.
 */
import type { WorkerHost } from "./host.ts";
import { HandlerContext, type AttemptTransaction, type JobContext } from "./handler-context.ts";
import { transactionOf } from "./transaction.ts";
import { toJob, type Job, type JobRecord } from "../core/job.ts";
import type { LazyAbort } from "./lazy-abort.ts";
import { describeThrown } from "../core/thrown.ts";
import { serializePayload } from "../core/validate.ts";
import type { Attempt, AttemptEnd, InFlight } from "./attempt.ts";
import type { Emitter } from "./emitter.ts";
import type { LocalBuffer } from "./local-buffer.ts";
import type { Lifecycle } from "./state.ts";
import { JobTimeoutError } from "./abort-reasons.ts";

export type { JobContext };

export type Handler<P> = (payload: P, ctx: JobContext<P>) => unknown | Promise<unknown>;


/** A renewal of buffered leases covers at least this many of the oldest (see Executor.startBuffered). */
const RENEW_AHEAD = 100;

export interface ExecutorParts {
  readonly host: WorkerHost;
  readonly life: Lifecycle;
  readonly inFlight: InFlight;
  readonly buffer: LocalBuffer;
  readonly emitter: Emitter;
  /** Wakes the claim loop now / on the next macrotask turn (see Producer). */
  readonly wake: () => void;
  readonly wakeNextTurn: () => void;
  /** The claim loop's last claim found nothing (see Producer.idle). */
  readonly idle: () => boolean;
  /** Handlers reserved for hand-offs in flight (see Producer.reserved): buffered jobs do not start on them. */
  readonly reserved: () => number;
  /** Queues an attempt's outcome for writing; resolves once it is recorded (or given up). */
  readonly record: (attempt: Attempt, outcome: AttemptEnd) => Promise<void>;
  /** Whether jobs of `queue` must not start: the worker knows it paused (see PausedQueues). */
  readonly paused: (queue: string) => boolean;
  /**
   * Extends the leases of `attempts` (at most one such write under way),
   * then calls `startBuffered` again. Called with the buffered attempts
   * about to start when the oldest one's lease is too short (see
   * `startBuffered`).
   */
  readonly renew: (attempts: readonly Attempt[]) => void;
}

export interface ExecutorConfig {
  readonly handlers: ReadonlyMap<string, Handler<unknown>>;
  readonly fallback: Handler<unknown> | null;
  /** The default time limit of an attempt, or null. */
  readonly timeoutMs: number | null;
  readonly concurrency: number;
  /** The lease length: a handler starts only while its attempt holds at least half of it (see `startBuffered`). */
  readonly leaseMs: number;
  /** Whether claims may overlap outcome writes (the adapter does not block the thread). */
  readonly overlap: boolean;
}

/**
 * Guarantees: a handler that throws anything (or returns a rejected promise,
 * or passes its timeout) is a failed attempt with the reason stored, never a
 * crashed worker; a handler's slot frees when it settles, before its outcome
 * is written; an attempt lost meanwhile (at a heartbeat) writes no outcome.
 */
export class Executor {
  readonly #parts: ExecutorParts;
  readonly #config: ExecutorConfig;
  /** Handlers running now (at most `concurrency`); a handler's outcome may still be unrecorded after it leaves. */
  #active = 0;

  constructor(parts: ExecutorParts, config: ExecutorConfig) {
    this.#parts = parts;
    this.#config = config;
  }

  /** Handlers free to start a job now. */
  get free(): number {
    return this.#config.concurrency - this.#active;
  }

  /**
   * Starts buffered jobs, oldest claim first, while handlers are free (and
   * the buffer is open). A handler starts only while its attempt holds its
   * lease by this worker's clock (counted from when the write that set it
   * began) with at least `leaseMs / 2` left: a claim or heartbeat that took
   * longer (a stalled database, a buffered job whose heartbeats failed)
   * renews the leases of the attempts about to start first (`renew`: the
   * oldest RENEW_AHEAD or `concurrency`, whichever is more), and an attempt whose renewal misses
   * is lost, never started. So another attempt of the job can start no
   * sooner than `leaseMs / 2` after this one started (it needs the lease
   * expired), unless the database is so slow that a renewal begun after the
   * lease was found short itself takes over `leaseMs / 2`: then the handler
   * starts on what that renewal left, if anything (the worker makes
   * progress whenever a write takes less than `leaseMs`). A job of a queue
   * the worker knows paused never starts: it is released (back to ready,
   * its attempt not counted).
   */
  startBuffered(): void {
    const buffer = this.#parts.buffer;
    while (this.#active < this.#config.concurrency - this.#parts.reserved()) {
      const attempt = buffer.peek();
      if (attempt === undefined) return;
      if (this.#parts.paused(attempt.record.queue)) {
        // Claimed before its queue's pause was known here: back to ready, unstarted.
        buffer.take();
        if (this.#parts.inFlight.get(attempt.key) === attempt) void this.#parts.record(attempt, { kind: "released" });
        continue;
      }
      if (this.#parts.inFlight.get(attempt.key) === attempt && !this.#fresh(attempt)) {
        // Renew the ones the handlers will start next (at least RENEW_AHEAD): a bounded write, whatever the buffer holds.
        const next = buffer.peekFirst(Math.max(RENEW_AHEAD, this.#config.concurrency - this.#parts.reserved() - this.#active));
        this.#parts.renew(next.filter((a) => this.#parts.inFlight.get(a.key) === a && !this.#fresh(a)));
        return;
      }
      buffer.take();
      this.#run(attempt);
    }
  }

  /** Whether `attempt`'s handler may start now (see startBuffered); notes when its lease was first found short. */
  #fresh(attempt: Attempt): boolean {
    const now = this.#parts.host.clock.now();
    const left = attempt.leaseExpiresAt - now;
    if (left >= this.#config.leaseMs / 2) return true;
    attempt.staleAt ??= now;
    return left > 0 && attempt.renewedAt >= attempt.staleAt;
  }

  #run(attempt: Attempt): void {
    const { inFlight, buffer } = this.#parts;
    const key = attempt.key;
    if (inFlight.get(key) !== attempt) return; // lost while buffered: reported at the heartbeat
    attempt.phase = "running";
    this.#active++;
    let freed = false;
    // The handler's slot frees when the handler settles; its outcome is written in a later batch.
    const free = () => {
      if (freed) return;
      freed = true;
      this.#active--;
      buffer.finished();
      this.startBuffered();
      // The buffer ran low: claim more now, while this outcome is written.
      // Not after a claim that found nothing: until this outcome is written nothing more is claimable (then the wake below).
      if (this.#config.overlap && buffer.low(buffer.size()) && !this.#parts.idle()) this.#parts.wakeNextTurn();
    };
    attempt.done = this.#execute(attempt, free).finally(() => {
      inFlight.delete(key);
      free();
      // On a blocking adapter the claim waits for the next turn, so timers run between the outcome write and it.
      if (buffer.low(buffer.size()) && !attempt.handedOff) this.#config.overlap ? this.#parts.wake() : this.#parts.wakeNextTurn();
    });
  }

  async #execute(attempt: Attempt, free: () => void): Promise<void> {
    const { record, controller } = attempt;
    const job = toJob(record);
    if (this.#parts.emitter.wants("started")) this.#parts.emitter.emit({ type: "started", job });
    // From the moment ctx.transaction writes the success, the lease check must not take the attempt for a lost
    // one (a heartbeat that lands after the commit finds no lease); if the write fails, it checks it again.
    // Made when the handler first reads ctx.transaction.
    let tx: ReturnType<typeof transactionOf> | null = null;
    const transaction: AttemptTransaction = {
      run: () =>
        (tx ??= transactionOf(this.#parts.host, record, (ending) => {
          if (!ending) {
            if (attempt.phase === "settling") attempt.phase = "running";
            return true;
          }
          // An attempt no longer running (timed out, or its handler returned), or no longer this worker's (a stop
          // past its timeout took it to release it), must not commit its transaction.
          if (attempt.phase !== "running" || this.#parts.inFlight.get(attempt.key) !== attempt) return false;
          attempt.phase = "settling";
          return true;
        })).run,
      open: () => (tx as ReturnType<typeof transactionOf> | null)?.running() ?? false,
      lost: () => this.#parts.inFlight.get(attempt.key) !== attempt,
    };
    const ran = await this.#runHandler(job, controller, record, transaction);
    free();
    if (!this.#parts.inFlight.has(attempt.key)) return; // lost at a heartbeat: reported there
    attempt.phase = "settling";
    const settled = (tx as ReturnType<typeof transactionOf> | null)?.settled() ?? null;
    const outcome: AttemptEnd = settled
      ? { kind: "settled", job: settled }
      : "result" in ran
        ? { kind: "succeeded", result: ran.result }
        : this.#parts.life.stopping && controller.aborted && !(controller.reason instanceof JobTimeoutError)
          ? { kind: "released" }
          : { kind: "failed", error: ran.failure, timedOut: ran.timedOut === true };
    await this.#parts.record(attempt, outcome);
  }

  /**
   * Runs the handler under the job's timeout: its return value as JSON text
   * (null for undefined), or the failure reason (a throw, a timeout, a value
   * that cannot be stored). Never throws.
   */
  async #runHandler(job: Job, controller: LazyAbort, record: JobRecord, transaction: AttemptTransaction): Promise<{ result: string | null } | { failure: string; timedOut?: true }> {
    const handler = this.#config.handlers.get(job.task) ?? this.#config.fallback;
    if (!handler) return { failure: `no handler for task ${JSON.stringify(job.task)} in this worker` };
    const host = this.#parts.host;
    const timeoutMs = job.timeoutMs ?? this.#config.timeoutMs;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let timeout: JobTimeoutError | null = null;
    try {
      const context = new HandlerContext(job, transaction, host, record, controller);
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
        if (value === undefined) return { result: null };
        const limit = host.payloadLimit();
        return { result: serializePayload(value, typeof limit === "number" ? limit : await limit, "result") };
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
}
