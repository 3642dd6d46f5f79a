/**
 * The completer: records attempts' outcomes. Outcomes finished in one turn
 * are written together in one `settle` call (a few batches in flight at
 * once); a write that fails is retried per attempt with backoff while its
 * lease can still be ours, and one that committed unseen is recognized.
 */
import type { WorkerHost } from "./host.ts";
import type { ReleasedChild, SettleItem, SettledJob } from "../core/adapter.ts";
import { toJob, type JobRecord } from "../core/job.ts";
import { errorBackoffDelay } from "../core/retry.ts";
import { nextTurn } from "../core/turn.ts";
import type { Attempt, AttemptEnd, InFlight, Outcome } from "./attempt.ts";
import type { Emitter } from "./emitter.ts";
import { attemptLabel, oneLine } from "./log.ts";
import { ERROR_BACKOFF_BASE_MS, ERROR_BACKOFF_MAX_MS } from "./producer.ts";
import type { Lifecycle } from "./state.ts";
import type { Producer } from "./producer.ts";

/** Batched outcome writes a worker keeps in flight at once. */
const MAX_FLUSHES = 3;
/** After a hand-off that took no job, outcome writes are plain settles for this long (ms). */
const HAND_OFF_RETRY_MS = 1000;

export interface CompleterParts {
  readonly host: WorkerHost;
  readonly life: Lifecycle;
  readonly inFlight: InFlight;
  readonly emitter: Emitter;
  /**
   * An outcome write freed concurrency-key slots (a keyed job finished or
   * failed): the write promoted the keys' next waiting jobs, so the claim
   * loop should look now, not at its next poll.
   */
  readonly slotsFreed: () => void;
  /** Children a completion released (SettledJob.released): stage them when due. */
  readonly childrenReleased: (children: readonly ReleasedChild[]) => void;
  /** A retry was scheduled at `at`: the claim loop should stage it then. */
  readonly requestStage: (at: number) => void;
  /** The claim loop's room for constrained jobs, for hand-offs (see Producer.reserveConstrained). */
  readonly handOff: Pick<Producer, "reserveConstrained" | "release" | "accept" | "handOffClaim" | "idle">;
  /** Reports attempts lost (see LeaseKeeper.reportLost). Never rejects. */
  readonly reportLost: (records: readonly JobRecord[], reason: string | null) => Promise<void>;
}

interface Pending {
  attempt: Attempt;
  outcome: Outcome;
  written: () => void;
}

export class Completer {
  readonly #parts: CompleterParts;
  /** Outcomes waiting for the next batched write (`#flush`). */
  #pending: Pending[] = [];
  /** Batched outcome writes in flight (at most MAX_FLUSHES). */
  #flushes = 0;
  /** A batched write is scheduled for the next turn. */
  #flushScheduled = false;
  /** Outcomes queued in #pending or in a batched write under way (the claim loop's room counts them). */
  #recording = 0;
  /** When a hand-off last took no job (see HAND_OFF_RETRY_MS). */
  #handOffMissedAt = Number.NEGATIVE_INFINITY;
  /** Batched writes under way that may hand slots off (see `handOffsSettled`). */
  readonly #handOffs = new Set<Promise<unknown>>();

  constructor(parts: CompleterParts) {
    this.#parts = parts;
  }

  get recording(): number {
    return this.#recording;
  }

  /**
   * Resolves once every write under way that may hand slots off has
   * returned, and its jobs are in the buffer. A write starts handing off
   * only while the worker runs, so after the worker leaves that state this
   * bounds when the buffer stops growing.
   */
  async handOffsSettled(): Promise<void> {
    while (this.#handOffs.size > 0) await Promise.allSettled([...this.#handOffs]);
  }

  /** Queues the attempt's outcome for the next batched write; resolves once it is recorded (or given up). */
  record(attempt: Attempt, outcome: AttemptEnd): Promise<void> {
    if (outcome.kind === "settled") {
      // Written by the handler's transaction: nothing to write, only to report.
      this.#parts.inFlight.delete(attempt.key);
      if (attempt.record.concurrencyKey !== null) this.#parts.slotsFreed();
      if (outcome.job.released) this.#parts.childrenReleased(outcome.job.released);
      if (this.#parts.emitter.wants("succeeded")) this.#parts.emitter.emit({ type: "succeeded", job: toJob({ ...attempt.record, ...outcome.job }) });
      return Promise.resolve();
    }
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
   * (`write`), which also finds one that committed before the error.
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

  async #flushBatch(batch: Pending[]): Promise<void> {
    const { host, inFlight } = this.#parts;
    const now = host.clock.now();
    const items = batch.map(({ attempt, outcome }) => this.#settleItem(attempt.record, outcome, now));
    let results: (SettledJob | null)[];
    // Completions free slots: where the adapter can, the write hands capped ones straight to this worker's next jobs.
    const handOff = this.#parts.handOff;
    const completions = items.filter((item) => item.kind === "complete").length;
    // After a hand-off that took nothing (no cap, or nothing ready) the next ones wait HAND_OFF_RETRY_MS: meanwhile no handler is reserved.
    const tryHandOff = host.adapter.settleAndHandOff && completions > 0 && this.#parts.life.state === "running" && now - this.#handOffMissedAt >= HAND_OFF_RETRY_MS;
    const reserved = tryHandOff ? handOff.reserveConstrained(completions) : 0;
    let accepted = false;
    try {
      if (reserved > 0) {
        const writing = (async () => {
          const written = await host.adapter.settleAndHandOff!({ items, handOff: handOff.handOffClaim(reserved, now), ...this.#announce() });
          handOff.accept(written.claimed, reserved);
          accepted = true;
          return written;
        })();
        this.#handOffs.add(writing);
        const written = await writing.finally(() => this.#handOffs.delete(writing));
        results = written.settled;
        this.#handOffMissedAt = written.claimed.length === 0 ? now : Number.NEGATIVE_INFINITY;
        // As many completions as jobs handed over need no claim to follow them (see Attempt.handedOff).
        let handed = written.claimed.length;
        batch.forEach((p, i) => {
          if (handed <= 0 || items[i]!.kind !== "complete" || !results[i]) return;
          p.attempt.handedOff = true;
          handed--;
        });
      } else results = await host.adapter.settle({ items, ...this.#announce() });
    } catch (error) {
      if (reserved > 0 && !accepted) handOff.release(reserved);
      this.#recording -= batch.length;
      await Promise.all(batch.map((p) => this.write(p.attempt, p.outcome, error as Error).then(p.written)));
      return;
    }
    this.#recording -= batch.length;
    if (items.some((item, i) => item.kind !== "release" && item.concurrencyKey !== null && results[i])) this.#parts.slotsFreed();
    const released = results.flatMap((r) => r?.released ?? []);
    if (released.length > 0) this.#parts.childrenReleased(released);
    batch.forEach((p, i) => {
      inFlight.delete(p.attempt.key);
      const settled = results[i] ?? null;
      if (settled) {
        this.#emitOutcome(p.attempt.record, settled, p.outcome);
        p.written();
      } else void this.#parts.reportLost([p.attempt.record], null).then(p.written);
    });
  }

  /** Whether the adapter should announce the cap slots an outcome write frees: when this worker's last claim found nothing, it will not take them. */
  #announce(): { announceFreed?: true } {
    return this.#parts.handOff.idle ? { announceFreed: true } : {};
  }

  /** What the adapter writes for `outcome` of the attempt claimed as `record`, at `now`. */
  #settleItem(record: JobRecord, outcome: Outcome, now: number): SettleItem {
    const { id, concurrencyKey, queue, task } = record;
    const leaseToken = record.leaseToken!;
    if (outcome.kind === "succeeded") return { kind: "complete", id, leaseToken, now, concurrencyKey, result: outcome.result, queue, task };
    if (outcome.kind === "released") return { kind: "release", id, leaseToken, now, concurrencyKey, queue, task };
    const plan = this.#parts.host.planFailure(record, now);
    return { kind: "fail", id, leaseToken, now, concurrencyKey, error: outcome.error, retryAt: plan.kind === "retry" ? plan.runAt : null, queue, task };
  }

  /**
   * Writes the attempt's outcome on its own, fenced by its lease. A write that
   * throws is retried with backoff while the lease can still be ours
   * (heartbeats keep it meanwhile); a write that matches nothing means the
   * lease was lost. `firstError`: a batched write already failed once.
   */
  async write(attempt: Attempt, outcome: Outcome, firstError?: Error): Promise<void> {
    const { host, inFlight } = this.#parts;
    const { record } = attempt;
    const operation = outcome.kind === "succeeded" ? "complete" : outcome.kind === "failed" ? "fail" : "release";
    for (let failures = 0; ; ) {
      if (failures === 0 && firstError !== undefined) {
        failures = 1;
        if (!(await this.#pauseAfterFailure(attempt, firstError, failures, operation))) return;
      }
      const now = host.clock.now();
      try {
        const [settled] = await host.adapter.settle({ items: [this.#settleItem(record, outcome, now)], ...this.#announce() });
        let result: JobRecord | null = settled ? { ...record, ...settled } : null;
        if (settled?.released) this.#parts.childrenReleased(settled.released);
        // After a failed try, the earlier write may have committed without its answer reaching us.
        if (result === null && failures > 0) result = await this.#committedEarlier(record, outcome);
        inFlight.delete(attempt.key);
        if (result) this.#emitOutcome(result, null, outcome);
        else await this.#parts.reportLost([record], null);
        return;
      } catch (error) {
        failures++;
        if (!(await this.#pauseAfterFailure(attempt, error as Error, failures, operation))) return;
      }
    }
  }

  /**
   * After the `failures`-th failed outcome write: waits the backoff pause and
   * returns true while the lease can still be ours (and the worker is not
   * releasing); else reports the job lost and returns false.
   */
  async #pauseAfterFailure(attempt: Attempt, error: Error, failures: number, operation: "complete" | "fail" | "release"): Promise<boolean> {
    const { host, inFlight, emitter, life } = this.#parts;
    attempt.phase = "retrying";
    const pause = errorBackoffDelay(failures, ERROR_BACKOFF_BASE_MS, ERROR_BACKOFF_MAX_MS, host.random);
    // From the shutdown timeout on (releasing, then stopped) retried writes give up: the sweep decides.
    const ours = inFlight.has(attempt.key) && (life.state === "running" || life.state === "draining");
    if (!ours || host.clock.now() + pause >= attempt.leaseExpiresAt) {
      emitter.emit({ type: "error", error, operation });
      inFlight.delete(attempt.key);
      emitter.emit({ type: "lost", job: toJob(attempt.record), reason: `could not record the outcome (${operation}) before the lease ended` });
      return false;
    }
    emitter.emit({ type: "error", error, operation, retryInMs: pause });
    await new Promise((r) => setTimeout(r, pause));
    return true;
  }

  /** The job as this attempt's outcome left it, if the job shows that outcome; else null. */
  async #committedEarlier(record: JobRecord, outcome: Outcome): Promise<JobRecord | null> {
    const now = await this.#parts.host.adapter.get({ id: record.id });
    if (!now || now.leaseToken !== null || now.updatedAt < record.updatedAt) return null;
    if (outcome.kind === "succeeded") return now.state === "succeeded" && now.attempt === record.attempt ? now : null;
    if (outcome.kind === "released") return now.state === "ready" && now.attempt === record.attempt - 1 ? now : null;
    return (now.state === "dead" || now.state === "scheduled") && now.attempt === record.attempt && now.lastError === outcome.error ? now : null;
  }

  /**
   * Reports the outcome the attempt's write recorded (the job as it left it:
   * `record` with `settled` over it), and logs a failure. A success or
   * release nobody reads builds nothing.
   */
  #emitOutcome(record: JobRecord, settled: SettledJob | null, outcome: Outcome): void {
    const { emitter, host } = this.#parts;
    if ((outcome.kind === "succeeded" || outcome.kind === "released") && !emitter.wants(outcome.kind)) return;
    const result = settled === null ? record : { ...record, ...settled };
    const job = toJob(result);
    if (result.state === "scheduled") this.#parts.requestStage(result.runAt);
    if (outcome.kind === "succeeded") emitter.emit({ type: "succeeded", job });
    else if (outcome.kind === "released") emitter.emit({ type: "released", job });
    else {
      const dead = result.state === "dead";
      const how = `${attemptLabel(job)} failed${outcome.timedOut ? " (timeout)" : ""}`;
      if (dead) emitter.log.error(`${how}, dead: ${oneLine(outcome.error)}`);
      else emitter.log.warn(`${how}, retry in ${Math.max(0, result.runAt - host.clock.now())} ms: ${oneLine(outcome.error)}`);
      emitter.emit({ type: dead ? "dead" : "retry", job, error: outcome.error });
    }
  }
}
