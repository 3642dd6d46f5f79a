/**
 * The local buffer: attempts claimed ahead of free handler slots (prefetch),
 * in claim order, and the size the claim loop keeps it at (fixed, or sized
 * by the rate this worker finishes jobs).
 *
 * Modes (each change asserted in `#to`):
 * - closed: the worker is not running; the buffer is empty and nothing is
 *   added or taken.
 * - open: the claim loop adds claimed attempts; free handler slots take
 *   them, oldest first.
 * - draining: the worker is stopping: a claim still under way may add its
 *   attempts, nothing is taken to run; `release()` hands every buffered
 *   attempt back (to be released unstarted) and closes it.
 * Transitions: closed → open (start), open → draining (stop), draining → closed (release).
 *
 * Sizing: with `prefetch: "auto"` the size is about AUTO_PREFETCH_MS of work
 * at the finishing rate, measured in samples of RATE_WINDOW_MS (or fewer
 * once RATE_SAMPLE_JOBS jobs finished in it): unmeasured until the first
 * claim, then a first sample taken as is, then each new sample averaged in;
 * at most AUTO_PREFETCH_FAIR_MAX jobs while the worker claims a fair queue's.
 */
import type { Attempt } from "./attempt.ts";

export type BufferMode = "closed" | "open" | "draining";

const TRANSITIONS: { readonly [M in BufferMode]: BufferMode } = { closed: "open", open: "draining", draining: "closed" };

/** The automatic prefetch buffer holds about this much work (ms at the current rate), between `concurrency` and AUTO_PREFETCH_MAX jobs. */
const AUTO_PREFETCH_MS = 250;
/**
 * AUTO_PREFETCH_MAX while the worker claims jobs of a fair queue (within
 * AUTO_FAIR_WINDOW_MS of the last it took): a job placed at a fair queue's
 * head waits for what its worker buffered before it, so this bounds that
 * wait in jobs. (A shorter time window instead starved MariaDB's fair
 * claims, which take turns: the buffer sized the claims, their small size
 * the rate the worker measured, and that rate the buffer.)
 */
const AUTO_PREFETCH_FAIR_MAX = 200;
const AUTO_FAIR_WINDOW_MS = 1_000;
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
  /** When the buffer last took a job of a fair queue (JobRecord.fairQueue), or -Infinity. */
  #fairAt = Number.NEGATIVE_INFINITY;

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
    return this.#attempts.splice(0);
  }

  /** Adds a claimed attempt at the end. Open or draining only. */
  add(attempt: Attempt): void {
    if (this.#mode === "closed") throw new Error("docket worker: local buffer is closed");
    if (attempt.record.fairQueue) this.#fairAt = this.#now();
    this.#attempts.push(attempt);
  }

  /** Adds attempts ahead of every buffered one (they have handlers reserved: see Producer.accept). */
  addFirst(attempts: readonly Attempt[]): void {
    if (this.#mode === "closed") throw new Error("docket worker: local buffer is closed");
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
    return this.#mode === "open" ? this.#attempts.shift() : undefined;
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
   * AUTO_PREFETCH_MAX_BLOCKING on a blocking adapter, or AUTO_PREFETCH_FAIR_MAX
   * within AUTO_FAIR_WINDOW_MS of taking a fair queue's job): a backlog of fast
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
    const max = now - this.#fairAt < AUTO_FAIR_WINDOW_MS ? AUTO_PREFETCH_FAIR_MAX : this.#blocking ? AUTO_PREFETCH_MAX_BLOCKING : AUTO_PREFETCH_MAX;
    return Math.min(max, Math.max(this.#concurrency, Math.round(this.#rate.perMs * AUTO_PREFETCH_MS)));
  }

  #to(next: BufferMode): void {
    if (TRANSITIONS[this.#mode] !== next) throw new Error(`docket worker: local buffer cannot go from ${this.#mode} to ${next}`);
    this.#mode = next;
  }
}
