/** What a store remembers of the fair queues between calls (see fairness.ts). */

/** How long a store trusts its list of fair queues for an enqueue of jobs without a fairness key (wall clock). */
export const FAIR_QUEUES_TTL_MS = 1000;

/**
 * How long a store uses a queue's clock it read (wall clock). A clock read
 * earlier is at most this much behind: a key that comes back within it
 * lands that much further ahead, before jobs placed since (bounded by what
 * the queue served in that time); it never lands behind its place.
 */
export const FAIR_CLOCK_TTL_MS = 100;

/**
 * What a store knows of the fair queues: those read (or made) fair and
 * prioritized (neither flag is ever cleared, so what it knows stays true),
 * and when it last read the list. A queue made fair by another process
 * is known here within FAIR_QUEUES_TTL_MS; a job without a fairness key
 * enqueued here before then has no tag, and claims take it after the
 * queue's tagged jobs.
 */
export class FairQueues {
  readonly fair = new Set<string>();
  readonly prioritized = new Set<string>();
  readAt = Number.NEGATIVE_INFINITY;
  /** Each fair queue's clock as last read, and when (wall clock): read again when older than FAIR_CLOCK_TTL_MS. */
  readonly clocks = new Map<string, { clock: number; at: number }>();
  /** Each fair queue's clock read under way on the store's pool, which callers on the pool share. */
  readonly reading = new Map<string, Promise<number>>();
}

