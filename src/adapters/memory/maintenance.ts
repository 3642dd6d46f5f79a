/**
 * The memory adapter's maintenance calls: a scheduled job made due now, replay of one dead job and of
 * dead jobs in bulk (due now, a fresh attempt budget, admitted through their
 * key when they fall due), purge of finished jobs, and the repair of keys
 * left with blocked jobs and free slots. Each is one step, so concurrent
 * callers replay or delete each job once.
 */
import type { PurgeParams, ReplayDeadParams } from "../../core/adapter.ts";
import { AdapterError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import { TERMINAL_STATES } from "../../core/states.ts";
import { applyTransition, countHolders, guardHolds, rebalance, transition } from "./guarded-write.ts";
import { announce, byName, copy, type MemoryState } from "./state.ts";

/** What a replay sets besides state and updatedAt: due now, a fresh attempt budget, no finish. */
function replaySet(now: number, resetSteps = false): Partial<JobRecord> {
  return { attempt: 0, runAt: now, finishedAt: null, lastError: null, ...(resetSteps ? { steps: null } : {}) };
}

/** See DocketAdapter.replay. */
export function replay(state: MemoryState, p: { id: number; now: number; resetSteps?: boolean }): JobRecord | null {
  const moved = transition(state, "replay", p, replaySet(p.now, p.resetSteps === true));
  if (!moved) return null;
  announce(state, [{ queue: moved.queue, due: true }]);
  return moved;
}

/** See DocketAdapter.runNow. */
export function runNow(state: MemoryState, p: { id: number; now: number }): JobRecord | null {
  const moved = transition(state, "runNow", p, { runAt: p.now });
  if (!moved) return null;
  announce(state, [{ queue: moved.queue, due: true }]);
  return moved;
}

/** See DocketAdapter.replayDead: dead jobs that died by the cutoff, oldest death first, at most `limit`; returned by id. */
export function replayDead(state: MemoryState, p: ReplayDeadParams): JobRecord[] {
  if (p.limit <= 0) return [];
  const picked = [...state.jobs.values()]
    .filter((j) => guardHolds(j, "replay", p) && j.finishedAt !== null && j.finishedAt <= p.diedBefore)
    .filter((j) => (p.queue === undefined || j.queue === p.queue) && (p.task === undefined || j.task === p.task))
    .sort((a, b) => a.finishedAt! - b.finishedAt! || a.id - b.id)
    .slice(0, p.limit);
  const replayed: JobRecord[] = [];
  for (const j of picked) {
    const moved = applyTransition(state, "replay", { id: j.id, now: p.now }, replaySet(p.now, p.resetSteps === true));
    if (moved) replayed.push(copy(moved));
  }
  announce(state, replayed.map((r) => ({ queue: r.queue, due: true })));
  return replayed.sort((a, b) => a.id - b.id);
}

/** See DocketAdapter.purge: finished jobs of `states` finished by the cutoff, oldest first, at most `limit`. */
export function purge(state: MemoryState, p: PurgeParams, name: string): number {
  if (p.limit <= 0 || p.states.length === 0) return 0;
  if (p.states.some((s) => !TERMINAL_STATES.includes(s))) throw new AdapterError(`${name}: purge takes finished states only`);
  const picked = [...state.jobs.values()]
    .filter((j) => p.states.includes(j.state) && j.finishedAt !== null && j.finishedAt <= p.finishedBefore)
    .filter((j) => (p.queue === undefined || j.queue === p.queue) && (p.task === undefined || j.task === p.task) && (p.id === undefined || j.id === p.id))
    .sort((a, b) => a.finishedAt! - b.finishedAt! || a.id - b.id)
    .slice(0, p.limit);
  for (const j of picked) {
    state.jobs.delete(j.id);
    // A purged job's edges go with it (see DocketAdapter.purge).
    for (const p of state.parents.get(j.id) ?? []) state.children.set(p, (state.children.get(p) ?? []).filter((c) => c !== j.id));
    for (const c of state.children.get(j.id) ?? []) state.parents.set(c, (state.parents.get(c) ?? []).filter((p) => p !== j.id));
    state.parents.delete(j.id);
    state.children.delete(j.id);
  }
  return picked.length;
}

/** See DocketAdapter.repairKeys: keys with blocked jobs (by name, at most `limit`) rebalanced; those of which a blocked job was unblocked are returned. */
export function repairKeys(state: MemoryState, p: { now: number; limit: number }): string[] {
  if (p.limit <= 0) return [];
  const names = new Set<string>();
  for (const j of state.jobs.values()) if (j.concurrencyKey !== null && guardHolds(j, "unblock", p)) names.add(j.concurrencyKey);
  const repaired: string[] = [];
  for (const name of [...names].sort(byName).slice(0, p.limit)) {
    const limit = state.keyLimits.get(name);
    const before = countHolders(state, name);
    if (limit === undefined || before >= limit) continue;
    if (rebalance(state, name, p.now) > 0) repaired.push(name);
  }
  return repaired;
}
