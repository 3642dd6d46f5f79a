/**
 * Fair sharing in the memory adapter, as the SQL adapters store it (the
 * rule is the core's, core/fairness.ts): each fair queue's keys with their
 * weights and last tags, and each fair job's tag.
 */
import type { NewJob } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { byClaimOrder } from "../../core/claim-order.ts";
import { IMPLICIT_FAIR_KEY, PLACED_WHEN_DUE, fairClock, fairKeysOf, fairTags } from "../../core/fairness.ts";
import type { MemoryState } from "./state.ts";

/**
 * The tags of a batch's jobs of fair queues (see core/fairness.ts), as the
 * SQL adapters give them: the queues of fairness-keyed jobs become fair
 * (and prioritized, for such a job of a priority other than 0); each
 * queue's clock is read before the batch; each key (the implicit key for a
 * job without one) advances by its jobs' steps, its stored weight the last
 * job's; a job placed when due gets PLACED_WHEN_DUE. Every job of the
 * batch counts, also one that merges or finds its idempotency key held
 * (its place stays unused).
 */
export function fairTagsOf(state: MemoryState, jobs: readonly NewJob[]): Map<NewJob, number> {
  for (const j of jobs) if (j.fairness && !state.fairKeys.has(j.queue)) state.fairKeys.set(j.queue, new Map());
  for (const j of jobs) if (state.fairKeys.has(j.queue) && j.priority !== 0) state.prioritized.add(j.queue);
  // Each job of a fair queue, with the implicit key when it names none; the core groups them by key.
  const keys = fairKeysOf(jobs.map((j) => (j.fairness || !state.fairKeys.has(j.queue) ? j : { ...j, fairness: { key: IMPLICIT_FAIR_KEY, weight: 1 } })));
  const clocks = new Map<string, number>();
  for (const { queue } of keys) if (!clocks.has(queue)) clocks.set(queue, clockOf(state, queue));
  const out = new Map<NewJob, number>();
  for (const { queue, name, weight, at, weights, due } of keys) {
    const stored = state.fairKeys.get(queue)!;
    const { tags, last } = fairTags(stored.get(name)?.last ?? 0, clocks.get(queue)!, weights);
    stored.set(name, { weight, last });
    at.forEach((i, k) => out.set(jobs[i]!, tags[k]!));
    for (const i of due) out.set(jobs[i]!, PLACED_WHEN_DUE);
  }
  return out;
}

/** `queue`'s clock (core fairClock): from the smallest tag of its ready jobs, or the largest last tag of its keys. */
function clockOf(state: MemoryState, queue: string): number {
  let head: number | null = null;
  for (const job of state.jobs.values()) {
    const tag = state.fairTags.get(job.id);
    if (job.queue === queue && job.state === "ready" && tag !== undefined && (head === null || tag < head)) head = tag;
  }
  return fairClock(head, Math.max(0, ...[...state.fairKeys.get(queue)!.values()].map((k) => k.last)));
}

/**
 * New places for tagged jobs about to become ready after waiting (due
 * scheduled jobs: delayed, retried or replayed), as the SQL adapters give
 * them when they stage such jobs: each key, in claim order, advances from
 * its last tag or the queue's clock (read before any of them is staged) by
 * its stored weight's step per job. Returns the new tags; the keys' last
 * tags are advanced.
 */
export function placeDue(state: MemoryState, jobs: readonly JobRecord[]): Map<number, number> {
  const groups = new Map<string, JobRecord[]>();
  for (const j of [...jobs].sort(byClaimOrder)) {
    if (!state.fairTags.has(j.id) || !state.fairKeys.has(j.queue)) continue;
    const id = JSON.stringify([j.queue, j.fairKey ?? IMPLICIT_FAIR_KEY]);
    groups.set(id, [...(groups.get(id) ?? []), j]);
  }
  const clocks = new Map<string, number>();
  for (const [, group] of groups) if (!clocks.has(group[0]!.queue)) clocks.set(group[0]!.queue, clockOf(state, group[0]!.queue));
  const out = new Map<number, number>();
  for (const [id, group] of [...groups].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const [queue, name] = JSON.parse(id) as [string, string];
    const stored = state.fairKeys.get(queue)!;
    const key = stored.get(name) ?? { weight: 1, last: 0 };
    const { tags, last } = fairTags(key.last, clocks.get(queue)!, group.map(() => key.weight));
    stored.set(name, { weight: key.weight, last });
    group.forEach((j, k) => out.set(j.id, tags[k]!));
  }
  return out;
}
