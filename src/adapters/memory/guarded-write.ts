/**
 * The memory adapter's one guarded write, and the concurrency-key rules
 * around it: a job moves only when the core TRANSITIONS table allows it
 * (its predecessor states and fence, checked on the stored job), and a
 * write that frees a slot promotes the key's waiting jobs in the same step.
 * Decisions are the core's (`admit`, `freeSlots`, `discardReason`,
 * `byClaimOrder`); this file only applies them to the maps of MemoryState.
 */
import type { ReadyNotice } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { byClaimOrder } from "../../core/claim-order.ts";
import { admit, discardReason, freeSlots } from "../../core/concurrency.ts";
import { SLOT_HOLDING_STATES } from "../../core/states.ts";
import { TRANSITIONS, endsJob, freesSlot, type TransitionEvent } from "../../core/transitions.ts";
import { announce, copy, type MemoryState } from "./state.ts";
import { placeDue } from "./fairness.ts";
import { settleChildren } from "./dependencies.ts";

/** Which job, under which lease, at what time: what a rule's fence is checked against. */
export interface GuardKey {
  id: number;
  now: number;
  leaseToken?: string;
}

/** The columns a write sets besides state and updatedAt, fixed or computed from the job as it is before the write. */
export type WriteSet = Partial<JobRecord> | ((job: JobRecord) => Partial<JobRecord>);

/** Whether `event` may move `job` now: the job is in one of the rule's predecessor states and the rule's fence holds. */
export function guardHolds(job: JobRecord, event: TransitionEvent, key: Omit<GuardKey, "id">): boolean {
  const rule = TRANSITIONS[event];
  if (!(rule.from as readonly string[]).includes(job.state)) return false;
  switch (rule.fence) {
    case "none":
      return true;
    case "due":
      return job.runAt <= key.now;
    case "lease":
      return job.leaseToken !== null && job.leaseToken === key.leaseToken;
    case "expired":
      return job.leaseToken !== null && job.leaseToken === key.leaseToken && job.leaseExpiresAt !== null && job.leaseExpiresAt <= key.now;
  }
}

/**
 * The guarded write on the stored job: when the guard holds, sets `set`,
 * the rule's target state and updatedAt, and returns the stored job (the
 * caller copies it out); null when it does not (nothing changes).
 */
export function applyTransition(state: MemoryState, event: TransitionEvent, key: GuardKey, set: WriteSet): JobRecord | null {
  const job = state.jobs.get(key.id);
  if (!job || !guardHolds(job, event, key)) return null;
  const values = typeof set === "function" ? set(job) : set;
  Object.assign(job, values, { state: TRANSITIONS[event].to, updatedAt: key.now });
  return job;
}

/**
 * A guarded write as one step: when `event` frees a slot of the job's key,
 * the key is rebalanced in the same step (the next waiting job is admitted
 * before anyone can observe the freed slot). Returns a copy of the job as
 * this write left it (as a SQL write's RETURNING, before the rebalance that
 * may admit the job itself, e.g. a retry due at once), or null.
 */
export function transition(state: MemoryState, event: TransitionEvent, key: GuardKey, set: WriteSet): JobRecord | null {
  const moved = applyTransition(state, event, key, set);
  if (!moved) return null;
  const written = copy(moved);
  if (moved.concurrencyKey !== null && freesSlot(event)) rebalance(state, moved.concurrencyKey, key.now);
  if (!endsJob(event)) return written;
  const released = settleChildren(state, moved, key.now, applyTransition);
  return released.length > 0 ? Object.assign(written, { released }) : written;
}

/** How many jobs of `key` hold a slot (SLOT_HOLDING_STATES). */
export function countHolders(state: MemoryState, key: string): number {
  let n = 0;
  for (const j of state.jobs.values()) if (j.concurrencyKey === key && SLOT_HOLDING_STATES.includes(j.state)) n++;
  return n;
}

/**
 * Makes key `name` exact: its waiting jobs (blocked, or scheduled and due),
 * in claim order, are admitted while the key has free slots; a due
 * scheduled job beyond that is blocked or, with the "discard" policy,
 * cancelled with the reason. Idempotent; a key with no stored limit is
 * left alone. Announces the queues of the jobs it admitted; returns how many
 * blocked jobs it unblocked (due scheduled jobs it admitted not counted).
 */
export function rebalance(state: MemoryState, name: string, now: number): number {
  const limit = state.keyLimits.get(name);
  if (limit === undefined) return 0;
  let holders = countHolders(state, name);
  const waiting = [...state.jobs.values()]
    .filter((j) => j.concurrencyKey === name && (guardHolds(j, "unblock", { now }) || guardHolds(j, "stage", { now })))
    .sort(byClaimOrder);
  const admitted: ReadyNotice[] = [];
  let unblocked = 0;
  for (const w of waiting) {
    if (w.state === "blocked") {
      if (freeSlots(limit, holders) > 0 && applyTransition(state, "unblock", { id: w.id, now }, {})) {
        holders++;
        unblocked++;
        admitted.push({ queue: w.queue, due: false });
      }
      continue;
    }
    const decision = admit(holders, limit, w.onConflict === "discard" ? "discard" : "block");
    if (decision === "ready") {
      if (applyTransition(state, "stage", { id: w.id, now }, {})) {
        holders++;
        admitted.push({ queue: w.queue, due: false });
      }
    } else if (decision === "blocked") {
      applyTransition(state, "stageBlocked", { id: w.id, now }, {});
    } else {
      const discarded = applyTransition(state, "stageDiscard", { id: w.id, now }, { finishedAt: now, lastError: discardReason(name, limit) });
      if (discarded) settleChildren(state, discarded, now, applyTransition);
    }
  }
  announce(state, admitted);
  return unblocked;
}

/** Admits every due scheduled job: unkeyed ones straight to ready (fair ones at new places), keyed ones through their key's rebalance. */
export function stageDue(state: MemoryState, now: number): void {
  const keys = new Set<string>();
  const due: JobRecord[] = [];
  for (const j of state.jobs.values()) {
    if (!guardHolds(j, "stage", { now })) continue;
    if (j.concurrencyKey === null) due.push(j);
    else keys.add(j.concurrencyKey);
  }
  // Unkeyed fair jobs take their places now (a keyed one keeps its place: its key admits it when a slot frees).
  const places = placeDue(state, due);
  const staged = new Set<string>();
  for (const j of due) {
    if (!applyTransition(state, "stage", { id: j.id, now }, {})) continue;
    staged.add(j.queue);
    if (places.has(j.id)) state.fairTags.set(j.id, places.get(j.id)!);
  }
  // As the SQL adapters do: the queues that gained ready jobs are announced.
  if (staged.size > 0) announce(state, [...staged].map((queue) => ({ queue, due: false })));
  for (const key of [...keys].sort()) rebalance(state, key, now);
}
