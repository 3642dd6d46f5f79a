import type { JobRecord } from "../../core/job.ts";
import type { JobState } from "../../core/states.ts";
import { SLOT_HOLDING_STATES, TERMINAL_STATES } from "../../core/states.ts";
import { TRANSITIONS, endsJob, freesSlot, planTransition, type TransitionEvent } from "../../core/transitions.ts";
import { discardReason } from "../../core/concurrency.ts";
import { controlIsDefault } from "../../core/controls.ts";
import { byClaimOrder } from "../../core/claim-order.ts";
import { DEBOUNCE_PENDING_STATES, mergedRunAt, type DebounceSpec } from "../../core/debounce.ts";

/**
 * The reference model of docket's storage: an in-memory, obviously
 * sequential version of the adapter contract, built on `src/core`'s
 * TRANSITIONS table. Every adapter must behave like it after every step
 * (model-based tests) and every concurrent history must be explainable by
 * some sequential order of its steps (linearizability, in invariants.ts).
 *
 * To extend it with a feature (concurrency keys, caps, pause, idempotency):
 * 1. add the new fields to `ModelJob` and to `MODEL_FIELDS` (they are then
 *    compared with the database after every step),
 * 2. add an op kind to `JobOp` and its event in `EVENT_OF`, with its effect in
 *    `EFFECTS` (the core TRANSITIONS table already gives from-states/fence),
 * 3. for cross-job rules (a key's limit, a cap), add a check in `ReferenceModel`
 *    (e.g. in `claim`), and an invariant in invariants.ts.
 */
export interface ModelJob {
  id: number;
  task: string;
  queue: string;
  state: JobState;
  priority: number;
  runAt: number;
  attempt: number;
  maxAttempts: number;
  leaseToken: string | null;
  leaseExpiresAt: number | null;
  updatedAt: number;
  finishedAt: number | null;
  lastError: string | null;
  /** The job's concurrency key, or null. */
  concurrencyKey: string | null;
  /** The key's policy when full at admission, or null. */
  onConflict: "block" | "discard" | null;
  timeoutMs: number | null;
  /** The idempotency key the job holds, or null. */
  idempotencyKey: string | null;
  /** The job's rate key, or null. */
  rateKey: string | null;
  /** The debounce key it was enqueued with, until a claim clears it; or null. */
  debounceKey: string | null;
  /** When it was stored (a merge's maxWaitMs counts from it). */
  createdAt: number;
  /** Its recorded steps as JSON text (core/steps.ts), or null. */
  steps: string | null;
}

/** The fields the model owns; compared field by field with the database. */
export const MODEL_FIELDS = [
  "id",
  "task",
  "queue",
  "state",
  "priority",
  "runAt",
  "attempt",
  "maxAttempts",
  "leaseToken",
  "leaseExpiresAt",
  "updatedAt",
  "finishedAt",
  "lastError",
  "concurrencyKey",
  "onConflict",
  "timeoutMs",
  "idempotencyKey",
  "rateKey",
  "debounceKey",
  "createdAt",
  "steps",
] as const satisfies readonly (keyof ModelJob & keyof JobRecord)[];

export function toModelJob(r: JobRecord): ModelJob {
  const out = {} as Record<string, unknown>;
  for (const f of MODEL_FIELDS) out[f] = r[f];
  return out as unknown as ModelJob;
}

/** The differing fields of two jobs, as `field: model ≠ actual` lines (empty when equal). */
export function diffJob(model: ModelJob | null, actual: ModelJob | JobRecord | null): string[] {
  if (model === null || actual === null) return model === actual ? [] : [`job: ${show(model)} ≠ ${show(actual)}`];
  const out: string[] = [];
  for (const f of MODEL_FIELDS) if (model[f] !== actual[f]) out.push(`${f}: model ${JSON.stringify(model[f])} ≠ actual ${JSON.stringify(actual[f])}`);
  return out;
}

function show(j: ModelJob | JobRecord | null): string {
  return j === null ? "null" : `#${j.id} ${j.state}`;
}

/** One write on one job, as data. `claim` here is the per-job projection of a claim that picked this job. */
export type JobOp =
  /** Staging/admission (scheduled → ready | blocked, blocked → ready): the side effect of a claim, or of a key's rebalance. */
  | { kind: "stage"; now: number }
  | { kind: "stageBlocked"; now: number }
  /** A due scheduled job with policy "discard" whose key is full; `reason` as the core's discardReason. */
  | { kind: "stageDiscard"; now: number; reason: string }
  | { kind: "unblock"; now: number }
  | { kind: "claim"; now: number; leaseToken: string; leaseExpiresAt: number }
  | { kind: "heartbeat"; now: number; leaseToken: string; leaseExpiresAt: number }
  /** The lease holder records its steps (the heartbeat transition, writing `steps`). */
  | { kind: "recordStep"; now: number; leaseToken: string; steps: string }
  | { kind: "complete"; now: number; leaseToken: string }
  | { kind: "fail"; now: number; leaseToken: string; error: string; retryAt: number | null }
  | { kind: "release"; now: number; leaseToken: string }
  | { kind: "expire"; now: number; leaseToken: string; error: string; retryAt: number | null }
  /** `reason`: a waiting child cancelled because its parent ended dead or cancelled (core/dependencies.ts cascadeReason). */
  | { kind: "cancel"; now: number; reason?: string }
  /** A waiting child whose last parent succeeded. */
  | { kind: "unwait"; now: number }
  | { kind: "replay"; now: number }
  /** An operator made this scheduled job due now. */
  | { kind: "runNow"; now: number }
  /** A debounced enqueue merging into this pending job: its options become the enqueue's, its run time `runAt`. */
  | { kind: "debounce"; now: number; runAt: number; priority: number; maxAttempts: number; timeoutMs: number | null; rateKey: string | null };

/** The TRANSITIONS event an op performs. */
export function eventOf(op: JobOp): TransitionEvent {
  switch (op.kind) {
    case "fail":
      return op.retryAt === null ? "bury" : "retry";
    case "expire":
      return op.retryAt === null ? "expireBury" : "expireRetry";
    case "recordStep":
      return "heartbeat";
    default:
      return op.kind;
  }
}

const CLEAR_LEASE = { leaseToken: null, leaseExpiresAt: null } as const;

/** What each event writes besides state and updatedAt; mirrors the adapter contract in core/adapter.ts. */
const EFFECTS: { [E in TransitionEvent]: (job: ModelJob, op: JobOp) => Partial<ModelJob> } = {
  stage: () => ({}),
  stageBlocked: () => ({}),
  stageDiscard: (_j, op) => ({ finishedAt: op.now, lastError: (op as { reason: string }).reason }),
  unblock: () => ({}),
  unwait: () => ({}),
  claim: (j, op) => ({ attempt: j.attempt + 1, leaseToken: token(op), leaseExpiresAt: (op as { leaseExpiresAt: number }).leaseExpiresAt, debounceKey: null }),
  heartbeat: (_j, op) => (op.kind === "recordStep" ? { steps: op.steps } : { leaseExpiresAt: (op as { leaseExpiresAt: number }).leaseExpiresAt }),
  complete: (_j, op) => ({ ...CLEAR_LEASE, finishedAt: op.now }),
  retry: (_j, op) => ({ ...CLEAR_LEASE, lastError: errorOf(op), runAt: retryAtOf(op) }),
  bury: (_j, op) => ({ ...CLEAR_LEASE, lastError: errorOf(op), finishedAt: op.now }),
  release: (j) => ({ ...CLEAR_LEASE, attempt: j.attempt - 1 }),
  expireRetry: (_j, op) => ({ ...CLEAR_LEASE, lastError: errorOf(op), runAt: retryAtOf(op) }),
  expireBury: (_j, op) => ({ ...CLEAR_LEASE, lastError: errorOf(op), finishedAt: op.now }),
  cancel: (_j, op) => ({ ...CLEAR_LEASE, finishedAt: op.now, ...("reason" in op && op.reason !== undefined ? { lastError: op.reason } : {}) }),
  replay: (_j, op) => ({ attempt: 0, runAt: op.now, finishedAt: null, lastError: null }),
  runNow: (_j, op) => ({ runAt: op.now }),
  debounce: (_j, op) => {
    const m = op as Extract<JobOp, { kind: "debounce" }>;
    return { runAt: m.runAt, priority: m.priority, maxAttempts: m.maxAttempts, timeoutMs: m.timeoutMs, rateKey: m.rateKey };
  },
};

function token(op: JobOp): string | null {
  return "leaseToken" in op ? op.leaseToken : null;
}
function errorOf(op: JobOp): string {
  return "error" in op ? op.error : "";
}
function retryAtOf(op: JobOp): number {
  return "retryAt" in op && op.retryAt !== null ? op.retryAt : op.now;
}

/**
 * Pure: the job after `op`, or null when the adapter must reject the write
 * (wrong state, or its fence does not hold). Legality comes from the core
 * TRANSITIONS table; only the fences are interpreted here.
 */
export function applyJobOp(job: ModelJob, op: JobOp): ModelJob | null {
  const event = eventOf(op);
  const to = planTransition(event, job.state);
  if (to === null) return null;
  switch (TRANSITIONS[event].fence) {
    case "none":
      break;
    case "due":
      if (job.runAt > op.now) return null;
      break;
    case "lease":
      if (job.leaseToken !== token(op)) return null;
      break;
    case "expired":
      if (job.leaseToken !== token(op) || job.leaseExpiresAt === null || job.leaseExpiresAt > op.now) return null;
      break;
  }
  return { ...job, ...EFFECTS[event](job, op), state: to, updatedAt: op.now };
}

export function isTerminal(state: JobState): boolean {
  return TERMINAL_STATES.includes(state);
}

/** Claim order: the core's (priority, smaller first; then run_at; then id). */
export const claimOrder: (a: ModelJob, b: ModelJob) => number = byClaimOrder;

export interface ModelNewJob {
  task: string;
  queue: string;
  state: "ready" | "scheduled";
  priority: number;
  runAt: number;
  maxAttempts: number;
  concurrency?: { key: string; limit: number; onConflict: "block" | "discard" } | null;
  timeoutMs?: number | null;
  idempotencyKey?: string | null;
  rateLimit?: { key: string; limit: number; periodMs: number } | null;
  /** A debounce key (never with a concurrency or idempotency key; the job is scheduled at `runAt`). */
  debounce?: DebounceSpec | null;
  /** Its parents, stored jobs by id (EnqueueOptions.after); never with `debounce`. */
  after?: { ids: readonly number[]; refs: readonly number[] } | null;
}

/** At most `limit` starts within any window of `periodMs`. */
export interface ModelRateLimit {
  limit: number;
  periodMs: number;
}

export interface ModelQueueControl {
  queue: string;
  paused: boolean;
  maxRunning: number | null;
  rateLimit: ModelRateLimit | null;
}

export interface ModelTaskControl {
  task: string;
  maxRunning: number | null;
  rateLimit: ModelRateLimit | null;
}

/** Whether `event` moves a job out of a slot-holding state, i.e. the write rebalances the job's key in its transaction. */
export function freesSlotEvent(event: TransitionEvent): boolean {
  return freesSlot(event);
}

/**
 * The whole store, sequentially. Method names and results mirror DocketAdapter.
 *
 * Cross-job rules live here: a key's stored limit and `rebalance` (admission
 * in priority, run_at, id order while holders < limit, due scheduled jobs
 * beyond that blocked), staging at the start of every claim, pause and
 * queue/task caps inside claim.
 */
export class ReferenceModel {
  readonly jobs = new Map<number, ModelJob>();
  /** Stored limit per concurrency key (set by every enqueue that names the key). */
  readonly keyLimits = new Map<string, number>();
  readonly queueControls = new Map<string, ModelQueueControl>();
  readonly taskControls = new Map<string, ModelTaskControl>();
  /** Stored limit per rate key (the last enqueue's that names the key). */
  readonly rateKeys = new Map<string, ModelRateLimit>();
  /** Queues that have held rate-keyed jobs: their control rows stay when every control is back to its default. */
  readonly rateKeyed = new Set<string>();
  /** Every start (claim time) of each rate limit, by `queue:`, `task:` or `key:` and its name. */
  readonly starts = new Map<string, number[]>();
  /** Each parent's children, in id order (EnqueueOptions.after). */
  readonly children = new Map<number, number[]>();
  /** Each waiting job's count of parents not yet succeeded. */
  readonly waitingOn = new Map<number, number>();

  /**
   * Why enqueueing `jobs` is refused for their parents (nothing stored), or
   * null: a parent that does not exist (NOT_FOUND), one dead or cancelled
   * (INVALID_ARGUMENT).
   */
  parentsRefused(jobs: readonly ModelNewJob[]): "NOT_FOUND" | "INVALID_ARGUMENT" | null {
    const ids = jobs.flatMap((j) => j.after?.ids ?? []);
    if (ids.some((id) => !this.jobs.has(id))) return "NOT_FOUND";
    return ids.some((id) => ["dead", "cancelled"].includes(this.jobs.get(id)!.state)) ? "INVALID_ARGUMENT" : null;
  }

  /**
   * Settles the children of job `id`, which a write just ended: on success
   * each waiting child counts one parent less and is released at 0; on dead
   * or cancelled every waiting descendant is cancelled, the reason naming it.
   */
  #settleChildren(id: number, now: number): void {
    const ended = this.jobs.get(id)!;
    if (ended.state === "succeeded") {
      for (const c of this.children.get(id) ?? []) {
        const left = this.waitingOn.get(c);
        if (left === undefined || this.jobs.get(c)?.state !== "waiting") continue;
        if (left > 1) {
          // The count is the child's own column: its last change is now.
          this.waitingOn.set(c, left - 1);
          this.jobs.set(c, { ...this.jobs.get(c)!, updatedAt: now });
        } else {
          this.waitingOn.delete(c);
          this.#write(c, { kind: "unwait", now });
        }
      }
      return;
    }
    if (ended.state !== "dead" && ended.state !== "cancelled") return;
    const reason = `cancelled: parent job ${id} ended ${ended.state}`;
    let front = [id];
    while (front.length > 0) {
      const next: number[] = [];
      for (const p of front) {
        for (const c of this.children.get(p) ?? []) {
          if (this.jobs.get(c)?.state !== "waiting") continue;
          this.waitingOn.delete(c);
          if (this.#write(c, { kind: "cancel", now, reason })) next.push(c);
        }
      }
      front = next;
    }
  }

  /**
   * Whether enqueueing `jobs` is refused (IdempotencyConflictError, nothing
   * stored): a job names an idempotency key that a job of another task holds,
   * or an earlier job of this call of another task names.
   */
  idempotencyConflict(jobs: readonly ModelNewJob[]): boolean {
    const taskOf = new Map<string, string>();
    for (const h of this.jobs.values()) if (h.idempotencyKey !== null) taskOf.set(h.idempotencyKey, h.task);
    for (const j of jobs) {
      if (!j.idempotencyKey) continue;
      const held = taskOf.get(j.idempotencyKey);
      if (held !== undefined && held !== j.task) return true;
      taskOf.set(j.idempotencyKey, held ?? j.task);
    }
    return false;
  }

  /**
   * Adds jobs under the ids the adapter assigned (the model does not predict
   * ids), in input order (after `idempotencyConflict` said they are accepted). A job whose idempotency key a job holds (also an
   * earlier one of this call) is not added: its result is the holder, with
   * `created: false`. Nor is a debounced job whose key has a pending job of
   * its queue and task (also an earlier one of this call): it merges into
   * that job (the `debounce` write), returned with `created: false`.
   */
  enqueue(jobs: readonly ModelNewJob[], ids: readonly number[], now: number): (ModelJob & { created: boolean })[] {
    const limits = new Map<string, number>();
    for (const j of jobs) if (j.concurrency) limits.set(j.concurrency.key, j.concurrency.limit);
    for (const key of [...limits.keys()].sort()) {
      this.keyLimits.set(key, limits.get(key)!);
      this.rebalance(key, now);
    }
    // A rate key's stored limit is the last one given; its queue gets a control row (the mark that its claims apply rate keys).
    for (const j of jobs) {
      if (!j.rateLimit) continue;
      this.rateKeys.set(j.rateLimit.key, { limit: j.rateLimit.limit, periodMs: j.rateLimit.periodMs });
      if (!this.queueControls.has(j.queue)) this.queueControls.set(j.queue, { queue: j.queue, paused: false, maxRunning: null, rateLimit: null });
      this.rateKeyed.add(j.queue);
    }
    return jobs.map((j, i) => {
      const holder = j.idempotencyKey ? [...this.jobs.values()].find((h) => h.idempotencyKey === j.idempotencyKey) : undefined;
      if (holder) return { ...holder, created: false };
      const d = j.debounce;
      const pending = d ? [...this.jobs.values()].find((p) => p.debounceKey === d.key && p.queue === j.queue && p.task === j.task && DEBOUNCE_PENDING_STATES.includes(p.state)) : undefined;
      if (d && pending) {
        const op: JobOp = { kind: "debounce", now, runAt: mergedRunAt(d, pending.createdAt, now), priority: j.priority, maxAttempts: j.maxAttempts, timeoutMs: j.timeoutMs ?? null, rateKey: j.rateLimit?.key ?? null };
        const merged = this.#write(pending.id, op);
        if (merged) return { ...merged, created: false };
      }
      const job: ModelJob = {
        id: ids[i]!,
        task: j.task,
        queue: j.queue,
        state: j.state,
        priority: j.priority,
        runAt: j.runAt,
        attempt: 0,
        maxAttempts: j.maxAttempts,
        leaseToken: null,
        leaseExpiresAt: null,
        updatedAt: now,
        finishedAt: null,
        lastError: null,
        concurrencyKey: j.concurrency?.key ?? null,
        onConflict: j.concurrency?.onConflict ?? null,
        timeoutMs: j.timeoutMs ?? null,
        idempotencyKey: j.idempotencyKey ?? null,
        rateKey: j.rateLimit?.key ?? null,
        debounceKey: d?.key ?? null,
        createdAt: now,
        steps: null,
      };
      const c = j.concurrency;
      const waits = (j.after?.ids ?? []).filter((p) => this.jobs.get(p)!.state !== "succeeded");
      if (waits.length > 0) {
        job.state = "waiting";
        this.waitingOn.set(job.id, waits.length);
      } else if (c && j.state === "ready" && this.holders(c.key) >= c.limit) {
        if (c.onConflict === "block") job.state = "blocked";
        else Object.assign(job, { state: "cancelled", finishedAt: now, lastError: discardReason(c.key, c.limit) });
      }
      this.jobs.set(job.id, job);
      for (const p of j.after?.ids ?? []) this.children.set(p, [...(this.children.get(p) ?? []), job.id]);
      return { ...job, created: true };
    });
  }

  /** Jobs of `key` holding a slot (ready or running). */
  holders(key: string): number {
    let n = 0;
    for (const j of this.jobs.values()) if (j.concurrencyKey === key && SLOT_HOLDING_STATES.includes(j.state)) n++;
    return n;
  }

  /** Makes `key` exact: waiting jobs (blocked, or scheduled and due) admitted in claim order while there is room; due scheduled beyond that blocked, or discarded by their policy. */
  rebalance(key: string, now: number): void {
    const limit = this.keyLimits.get(key);
    if (limit === undefined) return;
    let free = Math.max(0, limit - this.holders(key));
    const waiting = [...this.jobs.values()]
      .filter((j) => j.concurrencyKey === key && (j.state === "blocked" || (j.state === "scheduled" && j.runAt <= now)))
      .sort(claimOrder);
    for (const w of waiting) {
      if (free > 0) {
        if (this.#write(w.id, { kind: w.state === "blocked" ? "unblock" : "stage", now })) free--;
      } else if (w.state === "scheduled") {
        if (w.onConflict !== "discard") this.#write(w.id, { kind: "stageBlocked", now });
        else if (this.#write(w.id, { kind: "stageDiscard", now, reason: discardReason(key, limit) })) this.#settleChildren(w.id, now);
      }
    }
  }

  /** What `claim` does first: every due scheduled job of the whole table is admitted (unkeyed: ready; keyed: through its key). */
  stageDue(now: number): void {
    const due = [...this.jobs.values()].filter((j) => j.state === "scheduled" && j.runAt <= now);
    for (const j of due) if (j.concurrencyKey === null) this.#write(j.id, { kind: "stage", now });
    for (const key of new Set(due.filter((j) => j.concurrencyKey !== null).map((j) => j.concurrencyKey!))) this.rebalance(key, now);
  }

  running(column: "queue" | "task", value: string): number {
    let n = 0;
    for (const j of this.jobs.values()) if (j.state === "running" && j[column] === value) n++;
    return n;
  }

  /**
   * Stages, then claims like the adapter: paused queues skipped; then the
   * greedy rule over the ready jobs of the other queues in claim order: a job
   * is taken unless its queue's cap or its task's cap is full, up to `limit`.
   */
  claim(p: { queues: readonly string[]; limit: number; now: number; leaseToken: string; leaseExpiresAt: number }): ModelJob[] {
    if (p.limit <= 0 || p.queues.length === 0) return [];
    this.stageDue(p.now);
    const op: JobOp = { kind: "claim", now: p.now, leaseToken: p.leaseToken, leaseExpiresAt: p.leaseExpiresAt };
    const queues = [...new Set(p.queues)].filter((q) => !this.queueControls.get(q)?.paused);
    const room = (kind: "queue" | "task", name: string): number => {
      const cap = (kind === "queue" ? this.queueControls.get(name) : this.taskControls.get(name))?.maxRunning ?? null;
      return cap === null ? Infinity : cap - this.running(kind, name);
    };
    const queueRoom = new Map(queues.map((q) => [q, room("queue", q)]));
    const taskRoom = new Map<string, number>();
    // Rate limits: starts left in the window that ends now, per limit met.
    const rates = new Map<string, number>();
    const rateRoom = (id: string, limit: ModelRateLimit | null | undefined): number => {
      if (!limit) return Infinity;
      if (!rates.has(id)) rates.set(id, limit.limit - (this.starts.get(id) ?? []).filter((at) => p.now - at < limit.periodMs).length);
      return rates.get(id)!;
    };
    const limitsOf = (c: ModelJob): [string, ModelRateLimit | null | undefined][] => [
      [`queue:${c.queue}`, this.queueControls.get(c.queue)?.rateLimit],
      [`task:${c.task}`, this.taskControls.get(c.task)?.rateLimit],
      [`key:${c.rateKey}`, c.rateKey === null ? null : this.rateKeys.get(c.rateKey)],
    ];
    const chosen: ModelJob[] = [];
    const ready = [...this.jobs.values()].filter((j) => queues.includes(j.queue) && applyJobOp(j, op) !== null).sort(claimOrder);
    for (const c of ready) {
      if (chosen.length >= p.limit) break;
      if (!taskRoom.has(c.task)) taskRoom.set(c.task, room("task", c.task));
      if (queueRoom.get(c.queue)! <= 0 || taskRoom.get(c.task)! <= 0) continue;
      if (limitsOf(c).some(([id, limit]) => rateRoom(id, limit) <= 0)) continue;
      queueRoom.set(c.queue, queueRoom.get(c.queue)! - 1);
      taskRoom.set(c.task, taskRoom.get(c.task)! - 1);
      for (const [id, limit] of limitsOf(c)) {
        if (!limit) continue;
        rates.set(id, rateRoom(id, limit) - 1);
        this.starts.set(id, [...(this.starts.get(id) ?? []), p.now]);
      }
      chosen.push(c);
    }
    return chosen.map((j) => this.#write(j.id, op)!);
  }

  /** Applies a one-job write; returns the new job, or null when rejected (the job is unchanged). A write that frees a slot rebalances the job's key. */
  apply(id: number, op: JobOp): ModelJob | null {
    const next = this.#write(id, op);
    if (next !== null && next.concurrencyKey !== null && freesSlot(eventOf(op))) this.rebalance(next.concurrencyKey, op.now);
    if (next !== null && endsJob(eventOf(op))) this.#settleChildren(id, op.now);
    return next;
  }

  /** Only the given fields change; a removed rate limit forgets its starts, a changed one keeps them; a control back to every default keeps no row. */
  setQueueControl(p: { queue: string; paused?: boolean; maxRunning?: number | null; rateLimit?: ModelRateLimit | null }): ModelQueueControl {
    const c = this.queueControls.get(p.queue) ?? { queue: p.queue, paused: false, maxRunning: null, rateLimit: null };
    const next = {
      ...c,
      ...(p.paused === undefined ? {} : { paused: p.paused }),
      ...(p.maxRunning === undefined ? {} : { maxRunning: p.maxRunning }),
      ...(p.rateLimit === undefined ? {} : { rateLimit: p.rateLimit }),
    };
    if (p.rateLimit === null) this.starts.delete(`queue:${p.queue}`);
    // Back to every default (and unmarked): no row.
    if (controlIsDefault(next) && !this.rateKeyed.has(p.queue)) this.queueControls.delete(p.queue);
    else this.queueControls.set(p.queue, next);
    return { ...next };
  }

  setTaskControl(p: { task: string; maxRunning?: number | null; rateLimit?: ModelRateLimit | null }): ModelTaskControl {
    const c = this.taskControls.get(p.task) ?? { task: p.task, maxRunning: null, rateLimit: null };
    const next = { ...c, ...(p.maxRunning === undefined ? {} : { maxRunning: p.maxRunning }), ...(p.rateLimit === undefined ? {} : { rateLimit: p.rateLimit }) };
    if (p.rateLimit === null) this.starts.delete(`task:${p.task}`);
    if (controlIsDefault(next)) this.taskControls.delete(p.task);
    else this.taskControls.set(p.task, next);
    return { ...next };
  }

  listControls(): { queues: ModelQueueControl[]; tasks: ModelTaskControl[] } {
    const byName = <T>(m: Map<string, T>) => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => ({ ...v }));
    return { queues: byName(this.queueControls), tasks: byName(this.taskControls) };
  }

  listExpired(p: { now: number; limit: number }): ModelJob[] {
    return [...this.jobs.values()]
      .filter((j) => TRANSITIONS.expireRetry.from.includes(j.state as "running") && j.leaseExpiresAt !== null && j.leaseExpiresAt <= p.now)
      .sort((a, b) => a.leaseExpiresAt! - b.leaseExpiresAt! || a.id - b.id)
      .slice(0, p.limit)
      .map((j) => ({ ...j }));
  }

  get(id: number): ModelJob | null {
    const j = this.jobs.get(id);
    return j ? { ...j } : null;
  }

  all(): ModelJob[] {
    return [...this.jobs.values()].sort((a, b) => a.id - b.id).map((j) => ({ ...j }));
  }

  #write(id: number, op: JobOp): ModelJob | null {
    const job = this.jobs.get(id);
    if (!job) return null;
    const next = applyJobOp(job, op);
    if (next === null) return null;
    this.jobs.set(id, next);
    return { ...next };
  }
}
