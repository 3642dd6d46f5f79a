/**
 * Claim sizes while a fair queue is shared: small tenants beside a backlog.
 *
 * A job placed at a fair queue's head is taken by the next claim of any
 * worker; a worker claims when its buffer runs half empty, so the wait is
 * about half a buffer's work plus the claim's own run, and a large claim is
 * slow on a loaded server. While claims show a fair queue shared (a key
 * with one job claimed beside a key with several, in one queue), claims
 * take at most SHARED_FAIR_CLAIM_MAX jobs for SHARED_FAIR_MS after the last
 * such claim: more claims, each short, so a key that comes back waits for
 * less. A fair backlog alone (every key with several jobs, or every key
 * with one) keeps full claims.
 */
import type { JobRecord } from "../core/job.ts";

/** The most jobs a claim takes while a fair queue is shared. */
export const SHARED_FAIR_CLAIM_MAX = 200;
/** How long after the last claim that showed a shared fair queue claims stay small (ms). */
export const SHARED_FAIR_MS = 1_000;

/** A fair queue's job's (queue, fairness key) as one string (names hold no NUL); null for any other job. */
export const fairKeyOf = (record: JobRecord): string | null => (record.fairQueue ? `${record.queue}\u0000${record.fairKey ?? ""}` : null);

/** Whether `claimed` holds, for one fair queue, a key with exactly one job and a key with more than one. */
export function sharedFairClaim(claimed: readonly JobRecord[]): boolean {
  // Per queue: its keys' job counts.
  const queues = new Map<string, Map<string | null, number>>();
  for (const record of claimed) {
    if (!record.fairQueue) continue;
    let keys = queues.get(record.queue);
    if (!keys) queues.set(record.queue, (keys = new Map()));
    keys.set(record.fairKey ?? null, (keys.get(record.fairKey ?? null) ?? 0) + 1);
  }
  for (const keys of queues.values()) {
    const counts = [...keys.values()];
    if (counts.includes(1) && counts.some((n) => n > 1)) return true;
  }
  return false;
}
