/**
 * The memory adapter's claim: due scheduled jobs staged first (unless told
 * not to), then ready jobs of the claim's unpaused queues (and tasks) taken
 * in the core's claim order under the core's greedy cap rule
 * (`takeWithinCaps`), counting only jobs already running, with at most
 * `constrainedLimit` constrained jobs; every taken job runs under the
 * claim's lease with attempt + 1. One step: no other call
 * sees a half-done claim, and no job is taken twice.
 */
import type { ClaimParams } from "../../core/adapter.ts";
import { byClaimOrder, claimedOrder, claimLimits, holdRate, isConstrained, rateRoomOf, takeWithinCaps, type ClaimCandidate, type ClaimRoom } from "../../core/claim-order.ts";
import { IMPLICIT_FAIR_KEY, byFairOrder, mergeByHeads, withinKeys, type FairCandidate } from "../../core/fairness.ts";
import { claimedAt, delayingLimit, logStarts, nextRoomAt, rateRoom, rateSlack, type RateLimit, type RateScope } from "../../core/rate-limit.ts";
import type { JobRecord } from "../../core/job.ts";
import { applyTransition, guardHolds, stageDue } from "./guarded-write.ts";
import { copy, type MemoryState } from "./state.ts";

/** See DocketAdapter.claim. */
export function claim(state: MemoryState, params: ClaimParams): JobRecord[] {
  const constrainedLimit = claimLimits(params);
  if (params.limit <= 0 || params.queues.length === 0 || params.tasks?.length === 0) return [];
  if (params.stage !== false) stageDue(state, params.now);
  const queues = new Set(params.queues.filter((q) => state.queues.get(q)?.paused !== true));
  const tasks = params.tasks === undefined ? null : new Set(params.tasks);
  const room: ClaimRoom = { queues: new Map(), tasks: new Map(), constrained: constrainedLimit, rates: rateRoomOf(), takenConstrained: new Set() };
  const rates = room.rates!;
  /** Each rate limit met: its limit, and its map and name in the room. */
  const limits = new Map<string, { limit: RateLimit; map: Map<string, number>; scope: RateScope; name: string; heldUntil: number | null }>();
  const meet = (scope: RateScope, name: string, limit: RateLimit | null | undefined, map: Map<string, number>) => {
    if (!limit || map.has(name)) return;
    const id = `${scope}:${name}`;
    const log = state.rateLogs.get(id) ?? [];
    holdRate(rates, scope, name, rateRoom(log, limit.limit, limit.periodMs, params.now), rateSlack(log, limit.limit, limit.periodMs, params.now));
    limits.set(id, { limit, map, scope, name, heldUntil: state.rateHeldUntil.get(id) ?? null });
  };
  for (const q of queues) {
    const cap = state.queues.get(q)?.maxRunning ?? null;
    if (cap !== null) room.queues.set(q, cap - countRunning(state, "queue", q));
    meet("queue", q, state.queues.get(q)?.rateLimit, rates.queues);
  }
  let candidates: ClaimCandidate[] = [];
  for (const j of state.jobs.values()) {
    if (queues.has(j.queue) && (tasks === null || tasks.has(j.task)) && guardHolds(j, "claim", params)) candidates.push(j);
  }
  candidates.sort(byClaimOrder);
  for (const task of new Set(candidates.map((c) => c.task))) {
    const cap = state.tasks.get(task)?.maxRunning ?? null;
    if (cap !== null) room.tasks.set(task, cap - countRunning(state, "task", task));
    meet("task", task, state.tasks.get(task)?.rateLimit, rates.tasks);
  }
  for (const c of candidates) if (c.rateKey !== null && c.rateKey !== undefined) meet("key", c.rateKey, state.rateKeys.get(c.rateKey), rates.keys);
  const ready = [...candidates];
  const before = new Map([...limits].map(([id, l]) => [id, l.map.get(l.name)!]));
  // The greedy rule; a job of a full task, or a constrained job past constrainedLimit, must not hide the jobs
  // behind it: passes repeat without the exhausted tasks (and without constrained jobs once none may be taken).
  const chosen: number[] = [];
  const exhausted = new Set<string>();
  const fairQueues = [...queues].filter((q) => state.fairKeys.has(q));
  for (;;) {
    // Fair queues' first candidates in fair order (each key's best jobs in its places, in a prioritized queue),
    // merged with the others' (claim order) by their heads: as the SQL adapters do, pass by pass.
    const need = params.limit - chosen.length;
    const plain = candidates.filter((c) => !state.fairKeys.has(c.queue));
    const retags: ((chosen: ReadonlySet<number>) => Map<number, number>)[] = [];
    const served = fairQueues.map((q) => {
      const mine: FairCandidate[] = candidates.filter((c) => c.queue === q).map((c) => ({ ...c, fairTag: state.fairTags.get(c.id) ?? null }));
      const window = mine.sort(byFairOrder).slice(0, need);
      if (!state.prioritized.has(q)) return window;
      const counts = new Map<string, number>();
      for (const c of window) if (c.fairTag !== null) counts.set(c.fairKey ?? IMPLICIT_FAIR_KEY, (counts.get(c.fairKey ?? IMPLICIT_FAIR_KEY) ?? 0) + 1);
      const best = new Map<string, FairCandidate[]>();
      for (const [key, n] of counts) best.set(key, mine.filter((c) => c.fairTag !== null && (c.fairKey ?? IMPLICIT_FAIR_KEY) === key).sort(byClaimOrder).slice(0, n));
      const picked = withinKeys(window, best);
      retags.push(picked.retag);
      return picked.candidates;
    });
    const walk = mergeByHeads<ClaimCandidate>([plain, ...served]);
    const passedOver = takeWithinCaps(walk, params.limit, room, chosen, exhausted);
    for (const retag of retags) for (const [id, tag] of retag(new Set(chosen))) state.fairTags.set(id, tag);
    if (!passedOver) break;
    const taken = new Set(chosen);
    const full = room.constrained <= 0;
    candidates = candidates.filter(
      (c) => !taken.has(c.id) && !exhausted.has(c.task) && !(c.rateKey != null && rates.spentKeys.has(c.rateKey)) && !(full && isConstrained(c, room)),
    );
  }
  // Each limit's starts are logged; a limit that held a job back tells the caller when it has room again.
  let heldUntil = Number.POSITIVE_INFINITY;
  const taken = new Set(chosen);
  const at = claimedAt([...limits].map(([id, { map, name }]) => ({ log: state.rateLogs.get(id) ?? [], count: before.get(id)! - map.get(name)! })), params.now);
  for (const [id, { limit, map, name }] of limits) {
    const count = before.get(id)! - map.get(name)!;
    const log = state.rateLogs.get(id) ?? [];
    if (count > 0) state.rateLogs.set(id, JSON.parse(logStarts(log, params.now, count, limit.periodMs)));
    if (map.get(name)! > 0) continue;
    const until = nextRoomAt(state.rateLogs.get(id) ?? [], limit.limit, limit.periodMs, params.now);
    state.rateHeldUntil.set(id, until);
    if (heldBack(ready, taken, id)) heldUntil = Math.min(heldUntil, until);
  }
  if (heldUntil !== Number.POSITIVE_INFINITY) params.onRateLimited?.(heldUntil);
  const claimed: JobRecord[] = [];
  for (const id of chosen) {
    const set = (job: JobRecord) => ({ attempt: job.attempt + 1, leaseToken: params.leaseToken, leaseExpiresAt: params.leaseExpiresAt, worker: params.worker ?? null, debounceKey: null, startedAt: at });
    const moved = applyTransition(state, "claim", { id, now: params.now }, set);
    if (!moved) continue;
    const record = copy(moved);
    const delayedBy = delayingLimit(record, [...limits.values()]);
    if (delayedBy !== null) record.delayedBy = delayedBy;
    claimed.push(record);
  }
  return claimedOrder(claimed, params.constrainedLimit === undefined ? null : (j) => room.takenConstrained!.has(j.id));
}

/** How many jobs of a queue or task are running. */
function countRunning(state: MemoryState, column: "queue" | "task", value: string): number {
  let n = 0;
  for (const j of state.jobs.values()) if (j.state === "running" && j[column] === value) n++;
  return n;
}

/** Whether a candidate left untaken is subject to the limit `id` (`queue:`, `task:` or `key:` and a name). */
function heldBack(candidates: readonly ClaimCandidate[], taken: ReadonlySet<number>, id: string): boolean {
  return candidates.some((c) => !taken.has(c.id) && (id === `queue:${c.queue}` || id === `task:${c.task}` || id === `key:${c.rateKey}`));
}
