/**
 * The local buffer: attempts claimed ahead of free handler slots (prefetch),
 * in claim order, and the size the claim loop keeps it at (fixed, or sized
 * by the rate this worker finishes jobs).
 *
 * Modes (each change asserted in `#to`):
 * - closed: the worker is not running; the buffer is empty and nothing is
 *   added or taken.
 * - open: the claim loop adds claimed attempts; free handler slots take
 *   them, oldest first (a fair queue's lone keys' jobs go ahead: see `add`).
 * - draining: the worker is stopping: a claim still under way may add its
 *   attempts, nothing is taken to run; `release()` hands every buffered
 *   attempt back (to be released unstarted) and closes it.
 * Transitions: closed → open (start), open → draining (stop), draining → closed (release).
 *
 * Sizing: with `prefetch: "auto"` the size is about AUTO_PREFETCH_MS of work
 * at the finishing rate, measured in samples of RATE_WINDOW_MS (or fewer
 * once RATE_SAMPLE_JOBS jobs finished in it): unmeasured until the first
 * claim, then a first sample taken as is, then each new sample averaged in.
 */
import type { Attempt } from "./attempt.ts";
import { fairKeyOf } from "./fair-claims.ts";

export type BufferMode = "closed" | "open" | "draining";

/** A buffered job's fair key (see fairKeyOf). */
const keyOf = (a: Attempt): string | null => fairKeyOf(a.record);

const TRANSITIONS: { readonly [M in BufferMode]: BufferMode } = { closed: "open", open: "draining", draining: "closed" };

/** The automatic prefetch buffer holds about this much work (ms at the current rate), between `concurrency` and AUTO_PREFETCH_MAX jobs. */
const AUTO_PREFETCH_MS = 250;
const AUTO_PREFETCH_MAX = 2_000;
/** AUTO_PREFETCH_MAX on a blocking adapter, whose claim of n jobs holds the event loop for its whole run (~17 µs per job on SQLite). */
const AUTO_PREFETCH_MAX_BLOCKING = 1_000;
/** A finishing-rate sample spans this long, or ends sooner once RATE_SAMPLE_JOBS jobs finished in it (see `size`). */
const RATE_WINDOW_MS = 50;
const RATE_SAMPLE_JOBS = 100;

export class LocalBuffer {
  #mode: BufferMode = "closed";
  readonly #attempts: Attempt[] = [];
  readonly #concurrency: number;
  /** A fixed size, or null for "auto". */
  readonly #fixed: number | null;
  /** Whether the adapter blocks the thread (lower automatic maximum). */
  readonly #blocking: boolean;
  readonly #now: () => number;
  /** Handlers finished so far, and the finishing rate (jobs per ms, smoothed) the auto size follows; `at` 0: unmeasured. */
  #finished = 0;
  #rate = { perMs: 0, at: 0, finished: 0, sampled: false };
  /** Buffered jobs of fair queues per (queue, fairness key): see `add`. */
  readonly #perKey = new Map<string, number>();

  constructor(options: { concurrency: number; fixed: number | null; blocking: boolean; now: () => number }) {
    this.#concurrency = options.concurrency;
    this.#fixed = options.fixed;
    this.#blocking = options.blocking;
    this.#now = options.now;
  }

  get mode(): BufferMode {
    return this.#mode;
  }

  /** Attempts buffered now. */
  get length(): number {
    return this.#attempts.length;
  }

  open(): void {
    this.#to("open");
  }

  /** Stops handing attempts out (the worker is stopping). */
  drain(): void {
    this.#to("draining");
  }

  /** Every buffered attempt, oldest first, leaving the buffer empty and closed. */
  release(): Attempt[] {
    this.#to("closed");
    this.#perKey.clear();
    return this.#attempts.splice(0);
  }

  /**
   * Adds a claimed attempt at the end, unless it is a fair queue's job
   * (`JobRecord.fairQueue`) whose key has no other job buffered: that one
   * goes before the first buffered job of its queue whose key has more than
   * one buffered (after any other such lone keys' jobs). A key that comes
   * back with one job then starts at the next free handler, not after the
   * jobs a flooding key got buffered before it was enqueued (which its
   * place, given after them, cannot pass). Each key's jobs keep their order.
   * Open or draining only.
   */
  add(attempt: Attempt): void {
    if (this.#mode === "closed") throw new Error("docket worker: local buffer is closed");
    const key = keyOf(attempt);
    if (key === null) {
      this.#attempts.push(attempt);
      return;
    }
    const before = this.#perKey.get(key) ?? 0;
    this.#perKey.set(key, before + 1);
    const at = before === 0 ? this.#attempts.findIndex((a) => a.record.queue === attempt.record.queue && (this.#perKey.get(keyOf(a) ?? "") ?? 0) > 1) : -1;
    if (at === -1) this.#attempts.push(attempt);
    else this.#attempts.splice(at, 0, attempt);
  }

  /** Removes and returns the buffered attempts `which` selects (in buffer order); the others keep their order. */
  remove(which: (attempt: Attempt) => boolean): Attempt[] {
    const removed: Attempt[] = [];
    for (let i = this.#attempts.length - 1; i >= 0; i--) {
      const attempt = this.#attempts[i]!;
      if (!which(attempt)) continue;
      this.#attempts.splice(i, 1);
      removed.unshift(attempt);
      const key = keyOf(attempt);
      if (key === null) continue;
      const left = this.#perKey.get(key)! - 1;
      if (left === 0) this.#perKey.delete(key);
      else this.#perKey.set(key, left);
    }
    return removed;
  }

  /** Adds attempts ahead of every buffered one (they have handlers reserved: see Producer.accept). */
  addFirst(attempts: readonly Attempt[]): void {
    if (this.#mode === "closed") throw new Error("docket worker: local buffer is closed");
    for (const a of attempts) {
      const key = keyOf(a);
      if (key !== null) this.#perKey.set(key, (this.#perKey.get(key) ?? 0) + 1);
    }
    this.#attempts.unshift(...attempts);
  }

  /** The oldest buffered attempt, left in place; undefined when empty or not open. */
  peek(): Attempt | undefined {
    return this.#mode === "open" ? this.#attempts[0] : undefined;
  }

  /** The `n` oldest buffered attempts, left in place; none when not open. */
  peekFirst(n: number): Attempt[] {
    return this.#mode === "open" ? this.#attempts.slice(0, n) : [];
  }

  /** The oldest buffered attempt, removed; undefined when empty or not open. */
  take(): Attempt | undefined {
    if (this.#mode !== "open") return undefined;
    const taken = this.#attempts.shift();
    const key = taken === undefined ? null : keyOf(taken);
    if (key !== null) {
      const left = this.#perKey.get(key)! - 1;
      if (left === 0) this.#perKey.delete(key);
      else this.#perKey.set(key, left);
    }
    return taken;
  }

  /** Counts a handler that finished (the auto size follows the rate of these). */
  finished(): void {
    this.#finished++;
  }

  /** Whether the buffer is at or below half of `size`: time to claim more. */
  low(size: number): boolean {
    return this.#attempts.length <= Math.floor(size / 2);
  }

  /**
   * The buffer size now: the fixed one, or AUTO_PREFETCH_MS of work at the
   * smoothed finishing rate, within [concurrency, AUTO_PREFETCH_MAX] (or
   * AUTO_PREFETCH_MAX_BLOCKING on a blocking adapter): a backlog of fast
   * jobs reaches its full buffer within its first few claims, while slow
   * jobs are measured over the whole window.
   */
  size(): number {
    if (this.#fixed !== null) return this.#fixed;
    const now = this.#now();
    const rate = this.#rate;
    if (rate.at === 0) {
      this.#rate = { perMs: 0, at: now, finished: this.#finished, sampled: false };
    } else {
      const elapsed = now - rate.at;
      const count = this.#finished - rate.finished;
      if (elapsed >= RATE_WINDOW_MS || (count >= RATE_SAMPLE_JOBS && elapsed > 0)) {
        const recent = count / elapsed;
        this.#rate = { perMs: rate.sampled ? (rate.perMs + recent) / 2 : recent, at: now, finished: this.#finished, sampled: true };
      }
    }
    const max = this.#blocking ? AUTO_PREFETCH_MAX_BLOCKING : AUTO_PREFETCH_MAX;
    return Math.min(max, Math.max(this.#concurrency, Math.round(this.#rate.perMs * AUTO_PREFETCH_MS)));
  }

  #to(next: BufferMode): void {
    if (TRANSITIONS[this.#mode] !== next) throw new Error(`docket worker: local buffer cannot go from ${this.#mode} to ${next}`);
    this.#mode = next;
  }
}
