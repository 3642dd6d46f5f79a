/**
 * The lease keeper: extends the leases of the attempts this worker holds
 * (heartbeats), checks between heartbeats that running and buffered ones
 * still hold theirs, and handles a lost lease: the handler's signal aborts,
 * the attempt is dropped and reported `lost` with the reason the job shows.
 */
import type { WorkerHost } from "./host.ts";
import { toJob, type JobRecord } from "../core/job.ts";
import { attemptKey, LOST_CANCELLED, LOST_RECLAIMED, LOST_UNKNOWN, type Attempt, type InFlight } from "./attempt.ts";
import type { Emitter } from "./emitter.ts";
import { JobLeaseLostError } from "./abort-reasons.ts";

/** The longest a running handler's signal waits to abort after its job was cancelled in another process (see `checkLeases`). */
export const LEASE_CHECK_MAX_MS = 1000;

/** Lost attempts reported at once whose job is read to tell a cancel from a reclaim; the rest are LOST_UNKNOWN. */
const LOST_READS_MAX = 20;

export class LeaseKeeper {
  readonly #host: WorkerHost;
  readonly #inFlight: InFlight;
  readonly #emitter: Emitter;
  readonly #leaseMs: number;

  constructor(parts: { host: WorkerHost; inFlight: InFlight; emitter: Emitter }, leaseMs: number) {
    this.#host = parts.host;
    this.#inFlight = parts.inFlight;
    this.#emitter = parts.emitter;
    this.#leaseMs = leaseMs;
  }

  /**
   * Extends the lease of every attempt whose handler has not settled, and of
   * every outcome write being retried. Resolves to false when the write
   * failed (nothing was learned), true otherwise. Never rejects.
   */
  heartbeat(): Promise<boolean> {
    return this.extend([...this.#inFlight.values()].filter((a) => a.phase !== "settling"));
  }

  /**
   * Extends the leases of `attempts` (those still in flight and not
   * settling): a heartbeat of only these, as for buffered jobs about to
   * start (see Executor.startBuffered). Resolves to false when the write
   * failed, true otherwise. Never rejects.
   */
  async extend(which: readonly Attempt[]): Promise<boolean> {
    const now = this.#host.clock.now();
    const leaseExpiresAt = now + this.#leaseMs;
    const attempts = which.filter((a) => a.phase !== "settling" && this.#inFlight.get(a.key) === a);
    if (attempts.length === 0) return true;
    let kept: Set<string>;
    try {
      const items = attempts.map((a) => ({ id: a.record.id, leaseToken: a.record.leaseToken! }));
      kept = new Set((await this.#host.adapter.extendLeases({ items, now, leaseExpiresAt })).map(attemptKey));
    } catch (error) {
      this.#emitter.emit({ type: "error", error: error as Error, operation: "heartbeat" });
      return false;
    }
    const missed = new Set<Attempt>();
    for (const attempt of attempts) {
      if (kept.has(attempt.key)) {
        attempt.leaseExpiresAt = leaseExpiresAt;
        attempt.renewedAt = now;
      }
      else missed.add(attempt);
    }
    // Lost only while the handler still runs (or waits in the buffer): a completion that committed
    // while this heartbeat was in flight also makes it miss, and a retried write finds out itself.
    await this.abortLost((a) => missed.has(a), null);
    return true;
  }

  /**
   * Between heartbeats: reads whether the running and buffered attempts
   * still hold their leases (one statement), so a handler whose job another
   * process cancelled (or a sweeper reclaimed) sees its signal abort within
   * min(pollMs, LEASE_CHECK_MAX_MS), and such a buffered job is dropped
   * before it starts. Never rejects.
   */
  async checkLeases(): Promise<void> {
    const running = [...this.#inFlight.values()].filter((a) => a.phase === "running" || a.phase === "buffered");
    if (running.length === 0) return;
    let held: Set<string>;
    try {
      const items = running.map((a) => ({ id: a.record.id, leaseToken: a.record.leaseToken! }));
      held = new Set((await this.#host.adapter.heldLeases({ items })).map(attemptKey));
    } catch (error) {
      this.#emitter.emit({ type: "error", error: error as Error, operation: "heartbeat" });
      return;
    }
    const lost = new Set(running.filter((a) => !held.has(a.key)));
    await this.abortLost((a) => lost.has(a), null);
  }

  /** This docket cancelled job `id`: a running or buffered attempt of it is aborted at once and reported cancelled. */
  cancelled(id: number): void {
    void this.abortLost((a) => a.record.id === id, LOST_CANCELLED);
  }

  /**
   * Aborts the handlers of the running attempts `which` selects (a buffered
   * one never starts), at once, and reports them lost: their leases are gone.
   * `reason` null: not known here; read from the jobs before reporting.
   */
  async abortLost(which: (attempt: Attempt) => boolean, reason: string | null): Promise<void> {
    const lost: JobRecord[] = [];
    for (const attempt of [...this.#inFlight.values()]) {
      if ((attempt.phase !== "running" && attempt.phase !== "buffered") || !which(attempt)) continue;
      attempt.controller.abort(new JobLeaseLostError(reason === LOST_CANCELLED));
      this.#inFlight.delete(attempt.key);
      lost.push(attempt.record);
    }
    if (lost.length > 0) await this.reportLost(lost, reason);
  }

  /**
   * Reports the attempts claimed as `records` lost. Without a `reason`, reads
   * each job (the first LOST_READS_MAX) to tell a cancel from a reclaim.
   * Never rejects.
   */
  async reportLost(records: readonly JobRecord[], reason: string | null): Promise<void> {
    const reasons = reason !== null ? records.map(() => reason) : await Promise.all(records.map((r, i) => (i < LOST_READS_MAX ? this.#lossReason(r) : LOST_UNKNOWN)));
    records.forEach((record, i) => this.#emitter.emit({ type: "lost", job: toJob(record), reason: reasons[i]! }));
  }

  /** Why the attempt claimed as `record` no longer holds its lease, as the job now shows it. Never throws. */
  async #lossReason(record: JobRecord): Promise<string> {
    try {
      const now = await this.#host.adapter.get({ id: record.id });
      if (now === null) return "lease lost (the job was deleted)";
      if (now.state === "cancelled") return LOST_CANCELLED;
      // Not cancelled, and no longer under this attempt's lease: a sweep found it expired.
      return now.leaseToken === record.leaseToken ? LOST_UNKNOWN : LOST_RECLAIMED;
    } catch {
      return LOST_UNKNOWN;
    }
  }
}
