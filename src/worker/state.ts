/**
 * The worker's lifecycle as one named state (WorkerState), with its legal
 * transitions; every change goes through `Lifecycle.to`, which asserts it.
 */

/**
 * - idle: constructed, never started.
 * - running: claiming; handlers run; heartbeats, lease checks and sweeps tick.
 * - draining: `stop()` was called: no claims and no handler starts; buffered
 *   jobs are released; running handlers are aborted and get the shutdown
 *   timeout, their leases heartbeated and their outcomes written (retried
 *   when a write fails).
 * - releasing: the shutdown timeout passed: jobs whose handlers still run are
 *   released, and outcome writes still being retried give up (their leases
 *   expire and a sweep decides).
 * - stopped: `stop()` resolved: no timers, no subscriptions. `start()` runs it again.
 */
export type WorkerState = "idle" | "running" | "draining" | "releasing" | "stopped";

const TRANSITIONS: { readonly [S in WorkerState]: readonly WorkerState[] } = {
  idle: ["running"],
  running: ["draining"],
  draining: ["releasing"],
  releasing: ["stopped"],
  stopped: ["running"],
};

/** Holds a worker's WorkerState; read by every part, changed only by the Worker. */
export class Lifecycle {
  #state: WorkerState = "idle";

  get state(): WorkerState {
    return this.#state;
  }

  /** Between `start()` and the end of `stop()`: timers and subscriptions are live. */
  get started(): boolean {
    return this.#state !== "idle" && this.#state !== "stopped";
  }

  /** Draining or releasing: no new claims, no handler starts. */
  get stopping(): boolean {
    return this.#state === "draining" || this.#state === "releasing";
  }

  /** Moves to `next`; throws (a bug in the worker, not bad input) unless TRANSITIONS allows it. */
  to(next: WorkerState): void {
    if (!TRANSITIONS[this.#state].includes(next)) throw new Error(`docket worker: illegal state change ${this.#state} → ${next}`);
    this.#state = next;
  }
}
