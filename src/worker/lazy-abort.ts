/**
 * An abort controller whose AbortController is made only when its signal is
 * first read: most handlers never read it, and making one costs more than the
 * rest of an attempt's bookkeeping. Behaves as an AbortController: the first
 * `abort` wins, and a signal read after it is already aborted with that reason.
 */
export class LazyAbort {
  #controller: AbortController | null = null;
  #aborted = false;
  #reason: unknown = undefined;

  get signal(): AbortSignal {
    if (this.#controller === null) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  /** The first abort's reason (undefined while not aborted). */
  get reason(): unknown {
    return this.#reason;
  }

  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }
}
