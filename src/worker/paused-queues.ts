/**
 * What a worker knows of its queues' pauses, so that jobs it prefetched
 * before a pause do not start (docs/flow-control.md, "Pause").
 *
 * Three sources, each dated by the worker's clock: its own docket's
 * pauseQueue/resumeQueue (after the write committed), a read of the stored
 * controls (dated when the read began), and a claim that returned jobs of a
 * queue (dated when the claim began: the claim read the queue unpaused). A
 * fact replaces what is known of its queue only if it is dated no earlier,
 * so a read or claim begun before a pause was learned cannot undo it, and
 * jobs such a claim returns are held back as paused.
 */
export class PausedQueues {
  /** Per queue: whether it is paused, and when that was learned. Unknown queues are taken as not paused. */
  readonly #known = new Map<string, { paused: boolean; at: number }>();

  /** Whether jobs of `queue` must not start now. */
  paused(queue: string): boolean {
    return this.#known.get(queue)?.paused === true;
  }

  /** Whether any queue is known paused. */
  get any(): boolean {
    for (const k of this.#known.values()) if (k.paused) return true;
    return false;
  }

  /**
   * Records that `queue` was `paused` (or not) as of `at`. Returns true when
   * this makes a queue paused that was not known paused: its buffered jobs
   * must be released.
   */
  learn(queue: string, paused: boolean, at: number): boolean {
    const known = this.#known.get(queue);
    if (known !== undefined && known.at > at) return false;
    this.#known.set(queue, { paused, at });
    return paused && known?.paused !== true;
  }

  /**
   * A claim begun at `at` returned jobs of `queues`: each was not paused
   * then. Only a claim begun strictly after a pause was learned says so (one
   * begun in the same millisecond may have read the queue before the pause).
   */
  claimed(queues: Iterable<string>, at: number): void {
    for (const queue of queues) {
      const known = this.#known.get(queue);
      if (known !== undefined && known.at < at) this.learn(queue, false, at);
    }
  }
}
