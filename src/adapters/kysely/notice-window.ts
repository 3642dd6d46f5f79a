/**
 * Ready notices of one store's own committed writes, at most one per
 * notice (queue, due) per window: a notice asked for less than `windowMs`
 * after the last one of its kind is sent when the window ends, once for
 * every write committed meanwhile. Each notice wakes every idle worker of
 * its queue in every process, and PostgreSQL serializes the commits that
 * notify (a lock held across the commit's flush): a burst of writes must
 * not each send one.
 *
 * Guarantees: every write that asks (`announce`, after its commit) is
 * followed by a notice of its kind sent at or after that call, at most
 * `windowMs` later (`flush` sends the owed ones at once); a write told it
 * may `carry` its notice in its own statement counts as that window's
 * notice. Notices stay hints: a failed send is the background's to report.
 * With `windowMs` 0, every notice is sent when asked for.
 */

/** A ready notice: jobs of `queue` became ready (`due` false) or due to be staged (`due` true). */
export interface Notice {
  queue: string;
  due: boolean;
}

/**
 * The window of freed cap slots' notices (claim-parts.ts `freedCapQueues`), ms: the longest an idle worker
 * elsewhere waits for a freed slot's notice, beyond delivery; a busy capped queue's completions must not each send one.
 */
export const FREED_SLOT_NOTICE_MS = 50;

const keyOf = (n: Notice) => (n.due ? "d" : "r") + n.queue;

export class NoticeWindow {
  readonly #sentAt = new Map<string, number>();
  readonly #owed = new Map<string, { notice: Notice; timer: ReturnType<typeof setTimeout> }>();
  readonly #windowMs: number;
  readonly #send: (notices: Notice[]) => Promise<void>;
  readonly #background: (work: Promise<void>) => void;
  readonly #now: () => number;

  /** `send` announces notices (after the writes committed); `background` runs a send without holding up its caller. */
  constructor(windowMs: number, send: (notices: Notice[]) => Promise<void>, background: (work: Promise<void>) => void, now: () => number = Date.now) {
    this.#windowMs = windowMs;
    this.#send = send;
    this.#background = background;
    this.#now = now;
  }

  /**
   * Whether a write about to commit may carry `notice` in its own statement
   * (its window is closed: the notice opens it); when false the write calls
   * `announce` once it has committed.
   */
  carry(notice: Notice): boolean {
    return this.#opens(keyOf(notice), this.#now());
  }

  /** Whether a notice of `key` at `now` opens a window (none is open); if so, it counts as sent then. */
  #opens(key: string, now: number): boolean {
    if (now - (this.#sentAt.get(key) ?? Number.NEGATIVE_INFINITY) < this.#windowMs) return false;
    this.#sentAt.set(key, now);
    return true;
  }

  /** Announces each of `notices` (of writes that have committed) now, or when its window ends. */
  announce(notices: readonly Notice[]): void {
    const now = this.#now();
    const due: Notice[] = [];
    for (const notice of notices) {
      const key = keyOf(notice);
      if (this.#opens(key, now)) {
        due.push(notice);
      } else if (!this.#owed.has(key)) {
        const timer = setTimeout(() => {
          this.#owed.delete(key);
          this.#sentAt.set(key, this.#now());
          this.#background(this.#send([notice]));
        }, this.#sentAt.get(key)! + this.#windowMs - now);
        this.#owed.set(key, { notice, timer });
      }
    }
    if (due.length > 0) this.#background(this.#send(due));
  }

  /** Sends the owed notices now (the store closes, its writes are announced before its connections end). */
  flush(): void {
    const owed = [...this.#owed.values()];
    this.clear();
    if (owed.length > 0) this.#background(this.#send(owed.map((o) => o.notice)));
  }

  /** Drops the owed notices (hints no one needs: the store closes). */
  clear(): void {
    for (const { timer } of this.#owed.values()) clearTimeout(timer);
    this.#owed.clear();
  }
}
