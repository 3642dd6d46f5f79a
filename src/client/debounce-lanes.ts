/**
 * Coalescing of one process's concurrent debounced enqueues of one key.
 *
 * A debounced enqueue merges into its key's pending job under that job's
 * row lock (R22), so concurrent enqueues of one key queue on the lock, each
 * holding a pooled connection while it waits. Here, while one enqueue of a
 * lane (queue, task, key and every option a merge does not overwrite) is
 * being written, the next ones of this process wait in memory instead; when
 * it returns, all that waited are written as one enqueue: the last one's.
 *
 * Contract: the result is the one a sequence of those enqueues, one after
 * the other, would give. The last one's payload and merged options win,
 * as they would; every caller of the group gets the job that write merged
 * into or stored, and only the group's first is told `created: true`, and
 * only when that write stored a new job (the others merged into it). The
 * write's error is every caller's. The database's guard is unchanged: other
 * processes' enqueues and the claim meet this one at the row lock as before.
 */
import type { EnqueuedRecord, EnqueueParams, NewJob } from "../core/adapter.ts";

interface Waiter {
  params: EnqueueParams;
  resolve(records: EnqueuedRecord[]): void;
  reject(error: unknown): void;
}

/** The options a merge writes from the latest enqueue: any other difference keeps two enqueues in separate lanes. */
const MERGED_FIELDS = new Set<keyof NewJob>(["payload", "priority", "maxAttempts", "backoff", "timeoutMs", "traceContext", "runAt"]);

/**
 * The lane of `params`, or null when it is not coalesced: only one
 * debounced job without an idempotency key or parents, outside a caller's
 * transaction (whose commit this process cannot see).
 */
export function laneOf(params: EnqueueParams): string | null {
  if (params.transaction !== undefined || params.jobs.length !== 1) return null;
  const job = params.jobs[0]!;
  if (!job.debounce || job.idempotencyKey || job.after) return null;
  const kept = Object.entries(job).filter(([name]) => !MERGED_FIELDS.has(name as keyof NewJob));
  kept.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify([params.keysReleasedBefore ?? null, kept]);
}

/** One process's lanes. `write` stores one enqueue (the adapter's `enqueue`). */
export class DebounceLanes {
  readonly #write: (params: EnqueueParams) => Promise<EnqueuedRecord[]>;
  readonly #lanes = new Map<string, Waiter[]>();

  constructor(write: (params: EnqueueParams) => Promise<EnqueuedRecord[]>) {
    this.#write = write;
  }

  /** Writes `params` in its lane (see the module's contract); `lane` is `laneOf(params)`. */
  enqueue(lane: string, params: EnqueueParams): Promise<EnqueuedRecord[]> {
    return new Promise((resolve, reject) => {
      const waiting = this.#lanes.get(lane);
      if (waiting) {
        waiting.push({ params, resolve, reject });
        return;
      }
      const first: Waiter[] = [{ params, resolve, reject }];
      this.#lanes.set(lane, []);
      void this.#drain(lane, first);
    });
  }

  /** Writes `group`, then each group that gathered meanwhile, until none did; then the lane is gone. */
  async #drain(lane: string, group: Waiter[]): Promise<void> {
    for (;;) {
      try {
        const [record] = await this.#write(group[group.length - 1]!.params);
        group.forEach((w, i) => w.resolve([{ ...record!, created: record!.created && i === 0 }]));
      } catch (error) {
        for (const w of group) w.reject(error);
      }
      const next = this.#lanes.get(lane)!;
      if (next.length === 0) {
        this.#lanes.delete(lane);
        return;
      }
      this.#lanes.set(lane, []);
      group = next;
    }
  }
}
