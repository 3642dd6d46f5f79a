/**
 * The sweep a worker runs on a timer: expired leases every pass; finished
 * jobs past their retention and stranded concurrency keys at most every
 * PURGE_EVERY_MS. Failures become `error` events, repaired keys `keyRepaired`.
 */
import type { WorkerHost } from "./host.ts";
import type { Emitter } from "./emitter.ts";

/** How often a worker runs the maintenance pass (retention, then key repair). */
const PURGE_EVERY_MS = 60_000;

export class Sweeps {
  readonly #host: WorkerHost;
  readonly #emitter: Emitter;
  #lastPurge = Number.NEGATIVE_INFINITY;

  constructor(host: WorkerHost, emitter: Emitter) {
    this.#host = host;
    this.#emitter = emitter;
  }

  /** One pass. Never rejects. */
  async pass(): Promise<void> {
    const emitter = this.#emitter;
    try {
      await this.#host.reclaimExpired();
    } catch (error) {
      emitter.emit({ type: "error", error: error as Error, operation: "reclaim" });
    }
    const now = this.#host.clock.now();
    if (now - this.#lastPurge < PURGE_EVERY_MS) return;
    this.#lastPurge = now;
    const repaired = await this.#host.maintain((error, step) => emitter.emit({ type: "error", error, operation: step }));
    for (const key of repaired) emitter.emit({ type: "keyRepaired", key });
  }
}
