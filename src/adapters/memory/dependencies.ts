/**
 * Dependencies in the memory adapter (EnqueueOptions.after): checking a
 * batch's parents before anything is stored, wiring children to parents, and
 * settling a parent's children in the step that ends it: released
 * (TRANSITIONS.unwait) when its success was the last they waited for,
 * cancelled with their descendants when it ended dead or cancelled.
 */
import type { NewJob, ReadyNotice, ReleasedChild } from "../../core/adapter.ts";
import { cascadeReason, endedParentMessage } from "../../core/dependencies.ts";
import { InvalidArgumentError, NotFoundError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import type { TransitionEvent } from "../../core/transitions.ts";
import { TERMINAL_STATES } from "../../core/states.ts";
import { announce, type MemoryState } from "./state.ts";

/** The guarded write (guarded-write.ts `applyTransition`), passed in by its callers. */
type Apply = (state: MemoryState, event: TransitionEvent, key: { id: number; now: number }, set: Partial<JobRecord>) => JobRecord | null;

/**
 * How many parents each job of the batch waits for (0: none, or all stored
 * ones succeeded; a batch parent counts until `wire` finds it ended),
 * checked before anything is stored: a stored parent that does not exist is
 * NotFoundError, one dead or cancelled InvalidArgumentError.
 */
export function waitCounts(state: MemoryState, jobs: readonly NewJob[]): number[] {
  // A missing parent is reported first, whatever the others' states (as the SQL adapters do).
  const missing = jobs.flatMap((j) => j.after?.ids ?? []).find((id) => !state.jobs.has(id));
  if (missing !== undefined) throw new NotFoundError(missing, `after: parent job ${missing} not found`);
  return jobs.map((job) => {
    if (!job.after) return 0;
    let count = job.after.refs.length;
    for (const id of job.after.ids) {
      const parent = state.jobs.get(id);
      if (!parent) throw new NotFoundError(id, `after: parent job ${id} not found`);
      if (parent.state === "dead" || parent.state === "cancelled") throw new InvalidArgumentError(endedParentMessage(id, parent.state));
      if (parent.state !== "succeeded") count++;
    }
    return count;
  });
}

/**
 * Wires each created job of the batch to its parents (refs read as the ids
 * their items got) and records its wait count; then settles the new
 * children of batch parents that turned out ended (a discarded keyed job,
 * or a finished job an idempotency key stood for) as their end demands.
 */
export function wire(state: MemoryState, jobs: readonly NewJob[], records: readonly (JobRecord & { created: boolean })[], counts: readonly number[], now: number, applyTransition: Apply): void {
  const fresh = new Set<number>();
  const refParents = new Set<number>();
  jobs.forEach((job, i) => {
    const record = records[i]!;
    if (!job.after || !record.created) return;
    for (const r of job.after.refs) refParents.add(records[r]!.id);
    const parents = [...job.after.ids, ...job.after.refs.map((r) => records[r]!.id)].sort((a, b) => a - b);
    state.parents.set(record.id, parents);
    for (const p of parents) state.children.set(p, [...(state.children.get(p) ?? []), record.id]);
    if (counts[i]! > 0) state.waitingOn.set(record.id, counts[i]!);
    fresh.add(record.id);
  });
  for (const id of refParents) {
    const parent = state.jobs.get(id);
    if (parent && TERMINAL_STATES.includes(parent.state)) settleChildren(state, parent, now, applyTransition, fresh);
  }
}

/**
 * Settles the children of `job`, which a write just moved: on success each
 * waiting child counts one parent less and is released at 0 (announced as
 * due); on dead or cancelled every waiting descendant is cancelled, the
 * reason naming `job`. Nothing for other states.
 */
export function settleChildren(state: MemoryState, job: JobRecord, now: number, applyTransition: Apply, only?: ReadonlySet<number>): ReleasedChild[] {
  if (!state.children.has(job.id)) return [];
  if (job.state === "succeeded") {
    const due: ReadyNotice[] = [];
    const out: ReleasedChild[] = [];
    for (const c of state.children.get(job.id)!) {
      if (only && !only.has(c)) continue;
      const left = state.waitingOn.get(c);
      if (left === undefined || state.jobs.get(c)?.state !== "waiting") continue;
      if (left > 1) {
        // The count is the child's own column (on SQL): its last change is now.
        state.waitingOn.set(c, left - 1);
        state.jobs.get(c)!.updatedAt = now;
        continue;
      }
      state.waitingOn.delete(c);
      const released = applyTransition(state, "unwait", { id: c, now }, {});
      if (released) {
        due.push({ queue: released.queue, due: true });
        out.push({ queue: released.queue, runAt: released.runAt });
      }
    }
    announce(state, due);
    return out;
  }
  if (job.state !== "dead" && job.state !== "cancelled") return [];
  const reason = cascadeReason(job.id, job.state);
  let front = [job.id];
  while (front.length > 0) {
    const next: number[] = [];
    for (const p of front) {
      for (const c of state.children.get(p) ?? []) {
        if (only && p === job.id && !only.has(c)) continue;
        if (state.jobs.get(c)?.state !== "waiting") continue;
        if (applyTransition(state, "cancel", { id: c, now }, { finishedAt: now, lastError: reason })) {
          state.waitingOn.delete(c);
          next.push(c);
        }
      }
    }
    front = next;
  }
  return [];
}

/** The parents and children of job `id`, by id. */
export function dependenciesOf(state: MemoryState, id: number): { parents: number[]; children: number[] } {
  return { parents: [...(state.parents.get(id) ?? [])], children: [...(state.children.get(id) ?? [])] };
}
