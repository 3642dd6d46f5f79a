/**
 * Dependencies in the memory adapter (EnqueueOptions.after): checking a
 * batch's parents before anything is stored, wiring children to parents, and
 * settling a parent's children in the step that ends it: released
 * (TRANSITIONS.unwait) when its success was the last they waited for,
 * cancelled with their descendants when it ended dead or cancelled.
 */
import type { NewJob, ReadyNotice } from "../../core/adapter.ts";
import { cascadeReason, endedParentMessage } from "../../core/dependencies.ts";
import { InvalidArgumentError, NotFoundError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import type { TransitionEvent } from "../../core/transitions.ts";
import { announce, type MemoryState } from "./state.ts";

/** The guarded write (guarded-write.ts `applyTransition`), passed in by its callers. */
type Apply = (state: MemoryState, event: TransitionEvent, key: { id: number; now: number }, set: Partial<JobRecord>) => JobRecord | null;

/**
 * How many parents each job of the batch waits for (0: none, or all
 * succeeded), checked before anything is stored: a stored parent that does
 * not exist is NotFoundError, one (or an idempotent holder a ref stands
 * for) that is dead or cancelled InvalidArgumentError.
 */
export function waitCounts(state: MemoryState, jobs: readonly NewJob[], holderOf: (state: MemoryState, key: string) => JobRecord | null): number[] {
  return jobs.map((job) => {
    if (!job.after) return 0;
    let count = 0;
    for (const id of job.after.ids) {
      const parent = state.jobs.get(id);
      if (!parent) throw new NotFoundError(id, `after: parent job ${id} not found`);
      count += liveParent(parent.id, parent.state);
    }
    for (const ref of job.after.refs) {
      const key = jobs[ref]!.idempotencyKey;
      const holder = key ? holderOf(state, key) : null;
      count += holder ? liveParent(holder.id, holder.state) : 1;
    }
    return count;
  });
}

/** 1 for a parent still to succeed, 0 for a succeeded one; a dead or cancelled one is InvalidArgumentError. */
function liveParent(id: number, state: string): number {
  if (state === "dead" || state === "cancelled") throw new InvalidArgumentError(endedParentMessage(id, state));
  return state === "succeeded" ? 0 : 1;
}

/** Wires each created job of the batch to its parents (refs read as the ids their items got) and records its wait count. */
export function wire(state: MemoryState, jobs: readonly NewJob[], records: readonly (JobRecord & { created: boolean })[], counts: readonly number[]): void {
  jobs.forEach((job, i) => {
    const record = records[i]!;
    if (!job.after || !record.created) return;
    const parents = [...job.after.ids, ...job.after.refs.map((r) => records[r]!.id)].sort((a, b) => a - b);
    state.parents.set(record.id, parents);
    for (const p of parents) state.children.set(p, [...(state.children.get(p) ?? []), record.id]);
    if (counts[i]! > 0) state.waitingOn.set(record.id, counts[i]!);
  });
}

/**
 * Settles the children of `job`, which a write just moved: on success each
 * waiting child counts one parent less and is released at 0 (announced as
 * due); on dead or cancelled every waiting descendant is cancelled, the
 * reason naming `job`. Nothing for other states.
 */
export function settleChildren(state: MemoryState, job: JobRecord, now: number, applyTransition: Apply): void {
  if (!state.children.has(job.id)) return;
  if (job.state === "succeeded") {
    const due: ReadyNotice[] = [];
    for (const c of state.children.get(job.id)!) {
      const left = state.waitingOn.get(c);
      if (left === undefined) continue;
      if (left > 1) {
        state.waitingOn.set(c, left - 1);
        continue;
      }
      state.waitingOn.delete(c);
      const released = applyTransition(state, "unwait", { id: c, now }, {});
      if (released) due.push({ queue: released.queue, due: true });
    }
    announce(state, due);
    return;
  }
  if (job.state !== "dead" && job.state !== "cancelled") return;
  const reason = cascadeReason(job.id, job.state);
  let front = [job.id];
  while (front.length > 0) {
    const next: number[] = [];
    for (const p of front) {
      for (const c of state.children.get(p) ?? []) {
        if (state.jobs.get(c)?.state !== "waiting") continue;
        if (applyTransition(state, "cancel", { id: c, now }, { finishedAt: now, lastError: reason })) {
          state.waitingOn.delete(c);
          next.push(c);
        }
      }
    }
    front = next;
  }
}

/** The parents and children of job `id`, by id. */
export function dependenciesOf(state: MemoryState, id: number): { parents: number[]; children: number[] } {
  return { parents: [...(state.parents.get(id) ?? [])], children: [...(state.children.get(id) ?? [])] };
}
