/**
 * The memory adapter's store: every job, key limit, control and schedule of
 * one in-process "database", shared by every adapter handle connected to it,
 * and the subscribers to its ready notices. Plain data; the modules beside
 * this one change it, each in one synchronous step (nothing awaits between
 * reading and writing it), which is what makes each adapter call atomic.
 */
import type { QueueControl, ReadyNotice, StoredSchedule, TaskControl, WorkerRecord } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import type { RateLimit, StartLog } from "../../core/rate-limit.ts";
import { nextTurn } from "../../core/turn.ts";

export interface MemoryState {
  /** Whether `migrate()` ran: before it, every call is SCHEMA_MISSING, as on a database without docket's tables. */
  migrated: boolean;
  /** The id the next stored job gets (ids only grow, as a database sequence). */
  nextId: number;
  /** Every job by id, in id order (insertion order). Records are owned here: callers get copies. */
  readonly jobs: Map<number, JobRecord>;
  /** The stored limit of each concurrency key, set by every enqueue that names the key. */
  readonly keyLimits: Map<string, number>;
  readonly queues: Map<string, QueueControl>;
  readonly tasks: Map<string, TaskControl>;
  /** The stored limit of each rate key, set by every enqueue that names the key. */
  readonly rateKeys: Map<string, RateLimit>;
  /** The queues that have held rate-keyed jobs: their control rows stay when every control is back to its default (SQL's mark). */
  readonly rateKeyed: Set<string>;
  /** The starts inside the window of each rate limit, by `queue:`, `task:` or `key:` and its name. */
  readonly rateLogs: Map<string, StartLog>;
  /** When each rate limit a claim left with no room next has room, by the same ids (see JobRecord.delayedBy). */
  readonly rateHeldUntil: Map<string, number>;
  readonly schedules: Map<string, StoredSchedule>;
  /** The fair queues (those that have held fairness-keyed jobs), each with its keys' weights and last tags by key (see core/fairness.ts). */
  readonly fairKeys: Map<string, Map<string, { weight: number; last: number }>>;
  /** The fair queues that have held a fair job of a priority other than 0: their claims order each key's jobs by priority. */
  readonly prioritized: Set<string>;
  /** Each fair job's tag, by id (a job enqueued before its queue became fair has none). */
  readonly fairTags: Map<number, number>;
  /** Each child's parents (EnqueueOptions.after), by child id, in id order. */
  readonly parents: Map<number, number[]>;
  /** Each parent's children, by parent id, in id order. */
  readonly children: Map<number, number[]>;
  /** Each waiting job's count of parents not yet succeeded. */
  readonly waitingOn: Map<number, number>;
  /** The worker registry, by worker id. */
  readonly workers: Map<string, WorkerRecord>;
  /** Subscribers to ready notices, of every handle on this state. */
  readonly readyListeners: Set<(notice: ReadyNotice) => void>;
}

export function emptyState(): MemoryState {
  return {
    migrated: false,
    nextId: 1,
    jobs: new Map(),
    keyLimits: new Map(),
    queues: new Map(),
    tasks: new Map(),
    rateKeys: new Map(),
    rateKeyed: new Set(),
    rateLogs: new Map(),
    rateHeldUntil: new Map(),
    schedules: new Map(),
    fairKeys: new Map(),
    prioritized: new Set(),
    fairTags: new Map(),
    parents: new Map(),
    children: new Map(),
    waitingOn: new Map(),
    workers: new Map(),
    readyListeners: new Set(),
  };
}

/** A copy of a stored record: what callers get, so that mutating it never changes the store. */
export function copy(job: JobRecord): JobRecord {
  return { ...job };
}

/**
 * Tells every subscriber that jobs became ready (or due) in these queues, on
 * the next turn (as a database's notice arrives after its commit); one
 * notice per distinct queue and kind. A throwing listener is ignored.
 */
export function announce(state: MemoryState, notices: readonly ReadyNotice[]): void {
  if (notices.length === 0 || state.readyListeners.size === 0) return;
  const distinct = new Map<string, ReadyNotice>();
  for (const n of notices) distinct.set(`${n.due ? 1 : 0}:${n.queue}`, { queue: n.queue, due: n.due });
  void nextTurn().then(() => {
    for (const notice of distinct.values()) {
      for (const listener of [...state.readyListeners]) {
        try {
          listener({ ...notice });
        } catch {
          // A notice is a hint: a listener's failure changes nothing here.
        }
      }
    }
  });
}

/** Compares names by code point, as the SQL adapters' `ORDER BY name` does for the ASCII names docket validates. */
export function byName(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
