/**
 * What a lease holder's outcome (complete, fail, release) and a sweeper's
 * expiry write on a job, as the SQL adapters write it: the lease cleared,
 * the finish time, the result, the error appended to the job's history
 * (ERROR_HISTORY), the attempt given back on release. `settle` applies a
 * batch of outcomes, each fenced by its own lease.
 */
import type { FailParams, SettleItem, SettleParams, SettledJob } from "../../core/adapter.ts";
import { ERROR_HISTORY, type AttemptError, type JobRecord } from "../../core/job.ts";
import type { TransitionEvent } from "../../core/transitions.ts";
import { transition, type WriteSet } from "./guarded-write.ts";
import { announce, type MemoryState } from "./state.ts";

const CLEAR_LEASE = { leaseToken: null, leaseExpiresAt: null } as const;

/** A write: the transition and what it sets besides state and updatedAt. */
export interface Write {
  event: TransitionEvent;
  set: WriteSet;
}

/** What a lease holder's outcome writes. */
export function outcomeWrite(item: SettleItem): Write {
  if (item.kind === "complete") return { event: "complete", set: { ...CLEAR_LEASE, finishedAt: item.now, result: item.result ?? null } };
  if (item.kind === "release") return { event: "release", set: (job) => ({ ...CLEAR_LEASE, attempt: job.attempt - 1 }) };
  return failureWrite(item, "retry", "bury");
}

/**
 * A failed attempt's write, by its holder (retry/bury) or by a sweeper
 * (expireRetry/expireBury): retried at `retryAt`, or dead now; the error is
 * appended to the job's history with the attempt and worker it failed in.
 */
export function failureWrite(params: FailParams, retry: TransitionEvent, bury: TransitionEvent): Write {
  const error = (job: JobRecord): Partial<JobRecord> => ({ ...CLEAR_LEASE, lastError: params.error, errors: appendError(job, params) });
  return params.retryAt === null
    ? { event: bury, set: (job) => ({ ...error(job), finishedAt: params.now }) }
    : { event: retry, set: (job) => ({ ...error(job), runAt: params.retryAt! }) };
}

/** The job's error history with this failure appended, the oldest entry dropped past ERROR_HISTORY.entries. */
function appendError(job: JobRecord, params: FailParams): string {
  const history = job.errors === null ? [] : (JSON.parse(job.errors) as AttemptError[]);
  const entry: AttemptError = { attempt: job.attempt, at: params.now, error: params.error.slice(0, ERROR_HISTORY.chars), worker: job.worker };
  return JSON.stringify([...history, entry].slice(-ERROR_HISTORY.entries));
}

/** One outcome, fenced by its lease; a keyed job's freed slot is passed on in the same step. Null when the lease is not held. */
function applyOutcome(state: MemoryState, item: SettleItem): JobRecord | null {
  const { event, set } = outcomeWrite(item);
  const moved = transition(state, event, item, set);
  if (moved && item.kind === "release") announce(state, [{ queue: moved.queue, due: false }]);
  return moved;
}

/** See DocketAdapter.settle: each item applied as its own outcome, in input order. */
export function settle(state: MemoryState, params: SettleParams): (SettledJob | null)[] {
  return params.items.map((item) => applyOutcome(state, item));
}
