/**
 * Storing new jobs in the memory adapter, all in one step: idempotency keys
 * (a held key returns its holder; `keysReleasedBefore` takes keys from jobs
 * finished by then), concurrency keys (each key's stored limit set and the
 * key made exact first; a ready keyed job admitted by the core's `admit`:
 * ready, blocked, or cancelled by a "discard" policy), debounce keys (a
 * job whose key has a pending job of its queue and task merges into it with
 * the guarded `debounce` write), ids in input order, and a ready notice per
 * queue that got a ready job.
 */
import type { EnqueueParams, EnqueuedRecord, NewJob } from "../../core/adapter.ts";
import { admit, discardReason } from "../../core/concurrency.ts";
import { DEBOUNCE_PENDING_STATES, mergedRunAt } from "../../core/debounce.ts";
import { IdempotencyConflictError, InvalidArgumentError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import { newJobRecord } from "../../core/new-job.ts";
import { TERMINAL_STATES } from "../../core/states.ts";
import { checkNewJobs } from "./constraints.ts";
import { fairTagsOf } from "./fairness.ts";
import { waitCounts, wire } from "./dependencies.ts";
import { applyTransition, countHolders, rebalance } from "./guarded-write.ts";
import { announce, byName, copy, type MemoryState } from "./state.ts";

/** See DocketAdapter.enqueue. A memory store has no transactions: a `transaction` is InvalidArgumentError, and nothing is stored. */
export function enqueue(state: MemoryState, params: EnqueueParams, name: string): EnqueuedRecord[] {
  if (params.transaction !== undefined) {
    throw new InvalidArgumentError(`${name}: a memory store has no transactions; enqueue without the transaction option (the job is stored at once)`);
  }
  if (params.jobs.length === 0) return [];
  checkNewJobs(params.jobs, name);
  const { now } = params;
  // Parents are checked first (as on SQL), before anything changes: a refused call writes nothing.
  const waits = waitCounts(state, params.jobs);
  refuseConflicts(state, params.jobs, params.keysReleasedBefore);
  const idempotencyKeys = new Set(params.jobs.map((j) => j.idempotencyKey).filter((k): k is string => typeof k === "string"));
  if (idempotencyKeys.size > 0 && params.keysReleasedBefore !== undefined) releaseKeys(state, idempotencyKeys, params.keysReleasedBefore);
  const limits = new Map<string, number>();
  for (const j of params.jobs) if (j.concurrency) limits.set(j.concurrency.key, j.concurrency.limit);
  for (const key of [...limits.keys()].sort(byName)) {
    state.keyLimits.set(key, limits.get(key)!);
    rebalance(state, key, now);
  }
  // A rate key's stored limit is the last one given (as a concurrency key's); its queue gets a control row, as in SQL.
  for (const j of params.jobs) {
    if (!j.rateLimit) continue;
    const stored = state.rateKeys.get(j.rateLimit.key);
    if (stored?.limit !== j.rateLimit.limit || stored.periodMs !== j.rateLimit.periodMs) state.rateHeldUntil.delete(`key:${j.rateLimit.key}`);
    state.rateKeys.set(j.rateLimit.key, { limit: j.rateLimit.limit, periodMs: j.rateLimit.periodMs });
    if (!state.queues.has(j.queue)) state.queues.set(j.queue, { queue: j.queue, paused: false, maxRunning: null, rateLimit: null });
    state.rateKeyed.add(j.queue);
  }
  const tags = fairTagsOf(state, params.jobs);
  const records = params.jobs.map((job, i): EnqueuedRecord => {
    const holder = job.idempotencyKey ? holderOf(state, job.idempotencyKey) : null;
    if (holder) return { ...holder, created: false };
    const d = job.debounce;
    const pending = d ? pendingOf(state, job.queue, job.task, d.key) : null;
    if (d && pending) {
      const set = {
        payload: job.payload,
        priority: job.priority,
        maxAttempts: job.maxAttempts,
        backoff: job.backoff,
        timeoutMs: job.timeoutMs ?? null,
        traceContext: job.traceContext ?? null,
        rateKey: job.rateLimit?.key ?? null,
        fairKey: job.fairness?.key || null,
      };
      const merged = applyTransition(state, "debounce", { id: pending.id, now }, { ...set, runAt: mergedRunAt(d, pending.createdAt, now) });
      if (merged) {
        if (tags.has(job)) state.fairTags.set(merged.id, tags.get(job)!);
        else state.fairTags.delete(merged.id);
        return { ...copy(merged), created: false };
      }
    }
    const record = newJobRecord(state.nextId++, job, now);
    const c = job.concurrency;
    if (waits[i]! > 0) record.state = "waiting";
    else if (c && job.state === "ready") {
      const decision = admit(countHolders(state, c.key), c.limit, c.onConflict);
      if (decision === "blocked") record.state = "blocked";
      if (decision === "discarded") Object.assign(record, { state: "cancelled", finishedAt: now, lastError: discardReason(c.key, c.limit) });
    }
    state.jobs.set(record.id, record);
    if (tags.has(job)) state.fairTags.set(record.id, tags.get(job)!);
    return { ...record, created: true };
  });
  wire(state, params.jobs, records, waits, now, applyTransition);
  // A child settled by wire (its batch parent turned out ended) is returned as stored.
  records.forEach((r, i) => {
    const stored = state.jobs.get(r.id);
    if (r.created && stored && params.jobs[i]!.after) records[i] = { ...copy(stored), created: true };
  });
  announce(
    state,
    records.filter((r) => r.created && r.state === "ready").map((r) => ({ queue: r.queue, due: false })),
  );
  return records;
}

/**
 * Throws IdempotencyConflictError, before anything is changed, when a job's
 * idempotency key is held by a stored job of another task (one whose hold
 * `finishedBefore` ends does not count), or named by an earlier job of the
 * batch of another task.
 */
function refuseConflicts(state: MemoryState, jobs: readonly NewJob[], finishedBefore: number | undefined): void {
  const named = new Map<string, string>();
  for (const job of jobs) {
    const key = job.idempotencyKey;
    if (!key) continue;
    const stored = holderOf(state, key);
    const holder = stored && !(finishedBefore !== undefined && releasable(stored, finishedBefore)) ? stored : null;
    if (holder && holder.task !== job.task) throw new IdempotencyConflictError(key, job.task, { id: holder.id, task: holder.task });
    const earlier = named.get(key);
    if (!holder && earlier !== undefined && earlier !== job.task) throw new IdempotencyConflictError(key, job.task, { id: null, task: earlier });
    if (!named.has(key)) named.set(key, job.task);
  }
}

/** The job that holds idempotency key `key`, as stored (not a copy), or null. */
export function holderOf(state: MemoryState, key: string): JobRecord | null {
  for (const j of state.jobs.values()) if (j.idempotencyKey === key) return j;
  return null;
}

/** The pending job (DEBOUNCE_PENDING_STATES) of `queue` and `task` with debounce key `key`, as stored, or null. */
function pendingOf(state: MemoryState, queue: string, task: string, key: string): JobRecord | null {
  for (const j of state.jobs.values()) if (j.debounceKey === key && j.queue === queue && j.task === task && DEBOUNCE_PENDING_STATES.includes(j.state)) return j;
  return null;
}

/** See DocketAdapter.getByIdempotencyKey. */
export function getByIdempotencyKey(state: MemoryState, key: string): JobRecord | null {
  const holder = holderOf(state, key);
  return holder ? copy(holder) : null;
}

/** Takes `keys` from finished jobs that finished at or before `finishedBefore`: they no longer hold them. */
function releaseKeys(state: MemoryState, keys: ReadonlySet<string>, finishedBefore: number): void {
  for (const j of state.jobs.values()) {
    if (j.idempotencyKey !== null && keys.has(j.idempotencyKey) && releasable(j, finishedBefore)) {
      j.idempotencyKey = null;
    }
  }
}

/** Whether `job` finished at or before `finishedBefore`, so its idempotency key's hold has ended. */
function releasable(job: JobRecord, finishedBefore: number): boolean {
  return TERMINAL_STATES.includes(job.state) && job.finishedAt !== null && job.finishedAt <= finishedBefore;
}
