/**
 * WorkerHost: everything a worker needs from the docket that made it, and
 * nothing more. The worker runtime (src/worker) depends on this interface,
 * never on `Docket` (src/client); a docket hands each worker its own host
 * object (Docket's #workerHost).
 */
import type { DocketAdapter } from "../core/adapter.ts";
import type { Clock } from "../core/clock.ts";
import type { DocketEvent, DocketEventType } from "../core/events.ts";
import type { JobRecord, TaskMap } from "../core/job.ts";
import type { FailurePlan } from "../core/retry.ts";

export type { TaskMap };

/** A maintenance step whose failure `WorkerHost.maintain` reports. */
export type MaintenanceStep = "purge" | "repair";

export interface WorkerHost {
  /** The storage every claim, heartbeat and outcome write goes through. */
  readonly adapter: DocketAdapter;
  readonly clock: Clock;
  /** Randomness in [0, 1), for backoff jitter. */
  readonly random: () => number;
  /** The queue of a task that is not registered (a worker's default queues). */
  readonly defaultQueue: string;
  /** Each registered task's queue; empty without a task registry. */
  taskQueues(): ReadonlyMap<string, string>;
  /**
   * The largest result or progress value stored, in UTF-8 bytes of its JSON.
   * A number once known (no promise on the per-job path); a promise that
   * never rejects before: while the database's own limit cannot be read, the
   * docket's configured maximum.
   */
  payloadLimit(): number | Promise<number>;
  /** Where a failed attempt of `job` goes at `now`, by the retry policy that applies to it. Pure. */
  planFailure(job: JobRecord, now: number): FailurePlan;
  /** Whether anything listens for events of `type`: a worker builds an event for `publish` only then. */
  listens(type: DocketEventType): boolean;
  /** Reports an event a worker won or survived to the docket's listeners. Never throws. */
  publish(event: DocketEvent): void;
  /**
   * Calls `listener` with the queues of the ready jobs each committed enqueue
   * of this docket stored (`due`: a replay made jobs due, so a claim must
   * stage), or null after this docket changed a control that may let jobs
   * of any queue start. Returns an unsubscribe function.
   */
  onEnqueued(listener: (queues: ReadonlySet<string> | null, due: boolean) => void): () => void;
  /** Calls `listener` with the id of each job this docket cancelled, once the cancel committed. Returns an unsubscribe function. */
  onCancelled(listener: (id: number) => void): () => void;
  /** Calls `listener` with the queue and run time of the scheduled jobs each committed enqueue of this docket stored (delayed, or moved by a debounce merge). Returns an unsubscribe function. */
  onScheduled(listener: (jobs: readonly { queue: string; runAt: number }[]) => void): () => void;
  /** Calls `listener` with each queue this docket paused or resumed, once the write committed. Returns an unsubscribe function. */
  onPaused(listener: (queue: string, paused: boolean) => void): () => void;
  /** Subscribes a running worker's stop to the docket's `close()`, which waits for it before closing the adapter. */
  onClose(listener: () => Promise<void>): () => void;
  /** Whether the docket was closed: a worker does not start then. */
  closed(): boolean;
  /** One sweep of expired leases (each becomes a retry or a dead letter). Rejects with what the storage threw. */
  reclaimExpired(): Promise<unknown>;
  /**
   * The slow maintenance pass: deletes finished jobs past their retention,
   * then promotes blocked jobs of keys with free slots. A step that throws
   * is passed to `failed` and the next step still runs. Resolves to the
   * keys repaired; never rejects.
   */
  maintain(failed: (error: Error, step: MaintenanceStep) => void): Promise<string[]>;
}
