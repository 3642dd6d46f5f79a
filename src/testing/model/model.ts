import type { JobRecord } from "../../core/job.ts";
import type { JobState } from "../../core/states.ts";
import { TERMINAL_STATES } from "../../core/states.ts";
import { TRANSITIONS, planTransition, type TransitionEvent } from "../../core/transitions.ts";

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
  | { kind: "claim"; now: number; leaseToken: string; leaseExpiresAt: number }
  | { kind: "heartbeat"; now: number; leaseToken: string; leaseExpiresAt: number }
  | { kind: "complete"; now: number; leaseToken: string }
  | { kind: "fail"; now: number; leaseToken: string; error: string; retryAt: number | null }
  | { kind: "release"; now: number; leaseToken: string }
  | { kind: "expire"; now: number; leaseToken: string; error: string; retryAt: number | null }
  | { kind: "cancel"; now: number }
  | { kind: "replay"; now: number };

/** The TRANSITIONS event an op performs. */
export function eventOf(op: JobOp): TransitionEvent {
  switch (op.kind) {
    case "fail":
      return op.retryAt === null ? "bury" : "retry";
    case "expire":
      return op.retryAt === null ? "expireBury" : "expireRetry";
    default:
      return op.kind;
  }
}

const CLEAR_LEASE = { leaseToken: null, leaseExpiresAt: null } as const;

/** What each event writes besides state and updatedAt; mirrors the adapter contract in core/adapter.ts. */
const EFFECTS: { [E in TransitionEvent]: (job: ModelJob, op: JobOp) => Partial<ModelJob> } = {
  claim: (j, op) => ({ attempt: j.attempt + 1, leaseToken: token(op), leaseExpiresAt: (op as { leaseExpiresAt: number }).leaseExpiresAt }),
  heartbeat: (_j, op) => ({ leaseExpiresAt: (op as { leaseExpiresAt: number }).leaseExpiresAt }),
  complete: (_j, op) => ({ ...CLEAR_LEASE, finishedAt: op.now }),
  retry: (_j, op) => ({ ...CLEAR_LEASE, lastError: errorOf(op), runAt: retryAtOf(op) }),
  bury: (_j, op) => ({ ...CLEAR_LEASE, lastError: errorOf(op), finishedAt: op.now }),
  release: (j) => ({ ...CLEAR_LEASE, attempt: j.attempt - 1 }),
  expireRetry: (_j, op) => ({ ...CLEAR_LEASE, lastError: errorOf(op), runAt: retryAtOf(op) }),
  expireBury: (_j, op) => ({ ...CLEAR_LEASE, lastError: errorOf(op), finishedAt: op.now }),
  cancel: (_j, op) => ({ ...CLEAR_LEASE, finishedAt: op.now }),
  replay: (_j, op) => ({ attempt: 0, runAt: op.now, finishedAt: null }),
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

/** Claim order: priority (smaller first), then run_at, then id. */
export function claimOrder(a: ModelJob, b: ModelJob): number {
  return a.priority - b.priority || a.runAt - b.runAt || a.id - b.id;
}

export interface ModelNewJob {
  task: string;
  queue: string;
  state: "ready" | "scheduled";
  priority: number;
  runAt: number;
  maxAttempts: number;
}

/** The whole store, sequentially. Method names and results mirror DocketAdapter. */
export class ReferenceModel {
  readonly jobs = new Map<number, ModelJob>();

  /** Adds jobs under the ids the adapter assigned (the model does not predict ids). */
  enqueue(jobs: readonly ModelNewJob[], ids: readonly number[], now: number): ModelJob[] {
    return jobs.map((j, i) => {
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
      };
      this.jobs.set(job.id, job);
      return { ...job };
    });
  }

  claim(p: { queues: readonly string[]; limit: number; now: number; leaseToken: string; leaseExpiresAt: number }): ModelJob[] {
    if (p.limit <= 0) return [];
    const op: JobOp = { kind: "claim", now: p.now, leaseToken: p.leaseToken, leaseExpiresAt: p.leaseExpiresAt };
    const picked = [...this.jobs.values()]
      .filter((j) => p.queues.includes(j.queue) && applyJobOp(j, op) !== null)
      .sort(claimOrder)
      .slice(0, p.limit);
    return picked.map((j) => this.#write(j.id, op)!);
  }

  /** Applies a one-job write; returns the new job, or null when rejected (the job is unchanged). */
  apply(id: number, op: JobOp): ModelJob | null {
    return this.#write(id, op);
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
