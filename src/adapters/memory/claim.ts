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
import { byClaimOrder, claimedOrder, claimLimits, isConstrained, takeWithinCaps, type ClaimCandidate, type ClaimRoom } from "../../core/claim-order.ts";
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
  const room: ClaimRoom = { queues: new Map(), tasks: new Map(), constrained: constrainedLimit };
  for (const q of queues) {
    const cap = state.queues.get(q)?.maxRunning ?? null;
    if (cap !== null) room.queues.set(q, cap - countRunning(state, "queue", q));
  }
  let candidates: ClaimCandidate[] = [];
  for (const j of state.jobs.values()) {
    if (queues.has(j.queue) && (tasks === null || tasks.has(j.task)) && guardHolds(j, "claim", params)) candidates.push(j);
  }
  candidates.sort(byClaimOrder);
  for (const task of new Set(candidates.map((c) => c.task))) {
    const cap = state.tasks.get(task)?.maxRunning ?? null;
    if (cap !== null) room.tasks.set(task, cap - countRunning(state, "task", task));
  }
  // The greedy rule; a job of a full task, or a constrained job past constrainedLimit, must not hide the jobs
  // behind it: passes repeat without the exhausted tasks (and without constrained jobs once none may be taken).
  const chosen: number[] = [];
  const exhausted = new Set<string>();
  while (takeWithinCaps(candidates, params.limit, room, chosen, exhausted)) {
    const taken = new Set(chosen);
    const full = room.constrained <= 0;
    candidates = candidates.filter((c) => !taken.has(c.id) && !exhausted.has(c.task) && !(full && isConstrained(c, room)));
  }
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
