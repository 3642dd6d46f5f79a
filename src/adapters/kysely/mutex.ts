/**
 * A FIFO async mutex. `run` guarantees that no two callbacks passed to the
 * same mutex overlap, and that callers are served in call order.
 */
export class Mutex {
  #tail: Promise<void> = Promise.resolve();

  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(fn);
    this.#tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}
