/** Time source, in epoch milliseconds. Inject a fake one to control time in tests. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that only moves when told to; for tests and simulations. */
export class ManualClock implements Clock {
  #now: number;
  constructor(start = Date.UTC(2030, 0, 1)) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  advance(ms: number): number {
    this.#now += ms;
    return this.#now;
  }
  set(ms: number): void {
    this.#now = ms;
  }
}
