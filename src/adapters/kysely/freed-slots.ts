/**
 * Announcing freed cap slots to other processes (see claim-parts.ts
 * `freedCapQueues`), at most once per queue per FREED_SLOT_NOTICE_MS: a
 * queue announced less than that ago is announced again when the window
 * ends (so the last slot of a burst is never left unannounced), not once
 * per outcome batch. Each notice wakes every idle worker of the queue in
 * every process, and PostgreSQL serializes the commits that notify: a
 * busy capped queue's completions must not each send one.
 */

/** The shortest time between two announcements of one queue's freed slots, ms (the longest an idle worker elsewhere waits for one, beyond delivery). */
export const FREED_SLOT_NOTICE_MS = 50;

export class FreedSlotNotices {
  readonly #sentAt = new Map<string, number>();
  readonly #trailing = new Map<string, ReturnType<typeof setTimeout>>();
  readonly #send: (queues: string[]) => Promise<void>;
  readonly #background: (work: Promise<void>) => void;
  readonly #now: () => number;

  /** `send` announces queues (ReadyNotice, not due); `background` runs a send without holding up its caller. */
  constructor(send: (queues: string[]) => Promise<void>, background: (work: Promise<void>) => void, now: () => number = Date.now) {
    this.#send = send;
    this.#background = background;
    this.#now = now;
  }

  /** Announces each of `queues` now, or at the end of its window when it was announced within the last FREED_SLOT_NOTICE_MS. */
  announce(queues: readonly string[]): void {
    const now = this.#now();
    const due: string[] = [];
    for (const queue of queues) {
      const since = now - (this.#sentAt.get(queue) ?? Number.NEGATIVE_INFINITY);
      if (since >= FREED_SLOT_NOTICE_MS) {
        this.#sentAt.set(queue, now);
        due.push(queue);
      } else if (!this.#trailing.has(queue)) {
        const timer = setTimeout(() => {
          this.#trailing.delete(queue);
          this.#sentAt.set(queue, this.#now());
          this.#background(this.#send([queue]));
        }, FREED_SLOT_NOTICE_MS - since);
        this.#trailing.set(queue, timer);
      }
    }
    if (due.length > 0) this.#background(this.#send(due));
  }

  /** Cancels the announcements waiting for their window (the store closes). */
  clear(): void {
    for (const timer of this.#trailing.values()) clearTimeout(timer);
    this.#trailing.clear();
  }
}
