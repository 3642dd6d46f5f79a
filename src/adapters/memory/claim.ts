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
import { byClaimOrder, claimedOrder, claimLimits, isConstrained, rateRoomOf, takeWithinCaps, type ClaimCandidate, type ClaimRoom } from "../../core/claim-order.ts";
import { IMPLICIT_FAIR_KEY, advanceTurns, fairSequence, mergeByHeads } from "../../core/fairness.ts";
import { logStarts, nextRoomAt, rateRoom, type RateLimit } from "../../core/rate-limit.ts";
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
  const room: ClaimRoom = { queues: new Map(), tasks: new Map(), constrained: constrainedLimit, rates: rateRoomOf() };
  const rates = room.rates!;
  /** Each rate limit met: its limit, and its map and name in the room. */
  const limits = new Map<string, { limit: RateLimit; map: Map<string, number>; name: string }>();
  const meet = (scope: "queue" | "task" | "key", name: string, limit: RateLimit | null | undefined, map: Map<string, number>) => {
    if (!limit || map.has(name)) return;
    const id = `${scope}:${name}`;
    map.set(name, rateRoom(state.rateLogs.get(id) ?? [], limit.limit, limit.periodMs, params.now));
    limits.set(id, { limit, map, name });
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
  const byId = new Map(candidates.map((c) => [c.id, c]));
  /** Per fair queue, each key's candidates of the latest pass and how many that pass could take. */
  const lastPass = new Map<string, { ids: Map<string, number[]>; need: number }>();
  for (;;) {
    // Fair queues' candidates in round-robin order (the jobs chosen by earlier passes counting in their keys'
    // turns), merged with the others' (claim order) by their heads: as the SQL adapters do, pass by pass.
    const plain = candidates.filter((c) => !state.fairKeys.has(c.queue));
    const served = fairQueues.map((q) => {
      const lists = new Map<string, ClaimCandidate[]>();
      const ids = new Map<string, number[]>();
      for (const c of [...chosen.map((id) => byId.get(id)!), ...candidates]) {
        if (c.queue !== q) continue;
        const key = c.fairKey ?? IMPLICIT_FAIR_KEY;
        lists.set(key, [...(lists.get(key) ?? []), c]);
        if (!chosen.includes(c.id)) ids.set(key, [...(ids.get(key) ?? []), c.id]);
      }
      for (const list of lists.values()) list.sort(byClaimOrder);
      lastPass.set(q, { ids, need: params.limit - chosen.length });
      return fairSequence([...state.fairKeys.get(q)!.values()], lists).filter((c) => !chosen.includes(c.id));
    });
    const walk = mergeByHeads([plain, ...served]);
    if (!takeWithinCaps(walk, params.limit, room, chosen, exhausted)) break;
    const taken = new Set(chosen);
    const full = room.constrained <= 0;
    candidates = candidates.filter(
      (c) => !taken.has(c.id) && !exhausted.has(c.task) && !(c.rateKey != null && rates.spentKeys.has(c.rateKey)) && !(full && isConstrained(c, room)),
    );
  }
  // The served keys' turns advance (see core/fairness.ts advanceTurns).
  for (const q of fairQueues) {
    const keys = state.fairKeys.get(q)!;
    const taken = new Set(chosen);
    const mine = chosen.map((id) => byId.get(id)!).filter((c) => c.queue === q);
    const pass = lastPass.get(q)!;
    const out = new Set([...pass.ids].filter(([, ids]) => ids.length < pass.need && ids.every((id) => taken.has(id))).map(([key]) => key));
    const base = Math.max(0, ...[...keys.values()].map((t) => t.served));
    for (const [key, turn] of advanceTurns([...keys.values()], mine.map((c) => c.fairKey ?? IMPLICIT_FAIR_KEY), out, base)) keys.set(key, turn);
  }
  // Each limit's starts are logged; a limit that held a job back tells the caller when it has room again.
  let heldUntil = Number.POSITIVE_INFINITY;
  const taken = new Set(chosen);
  for (const [id, { limit, map, name }] of limits) {
    const count = before.get(id)! - map.get(name)!;
    const log = state.rateLogs.get(id) ?? [];
    if (count > 0) state.rateLogs.set(id, JSON.parse(logStarts(log, params.now, count, limit.periodMs)));
    if (map.get(name)! <= 0 && heldBack(ready, taken, id)) heldUntil = Math.min(heldUntil, nextRoomAt(state.rateLogs.get(id) ?? [], limit.limit, limit.periodMs, params.now));
  }
  if (heldUntil !== Number.POSITIVE_INFINITY) params.onRateLimited?.(heldUntil);
  const claimed: JobRecord[] = [];
  for (const id of chosen) {
    const set = (job: JobRecord) => ({ attempt: job.attempt + 1, leaseToken: params.leaseToken, leaseExpiresAt: params.leaseExpiresAt, worker: params.worker ?? null, debounceKey: null });
    const moved = applyTransition(state, "claim", { id, now: params.now }, set);
    if (moved) claimed.push(copy(moved));
  }
  return claimedOrder(claimed, params.constrainedLimit === undefined ? null : (j) => isConstrained(j, room));
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
