/**
 * One attempt of one job in a worker, from claim to outcome: its record,
 * phase and lease, the outcome it ends with, and the reasons an attempt is
 * reported lost. Shared by every part of the runtime.
 */
import type { JobRecord } from "../core/job.ts";
import type { SettledJob } from "../core/adapter.ts";
import { LazyAbort } from "./lazy-abort.ts";

/** One attempt, identified by `key` (attemptKey). */
export interface Attempt {
  readonly record: JobRecord;
  /** attemptKey(record), made once. */
  readonly key: string;
  readonly controller: LazyAbort;
  /** Settles once the attempt's handler ran and its outcome was recorded (or given up). */
  done: Promise<void>;
  /**
   * buffered: claimed, its handler not started yet (heartbeats keep the
   * lease); running: the handler has not settled (heartbeats keep the
   * lease, also while stopping); settling: its outcome is being written;
   * retrying: an outcome write failed and is tried again (heartbeats keep
   * the lease).
   */
  phase: "buffered" | "running" | "settling" | "retrying";
  /** When the lease ends unless a heartbeat extends it, as last written. */
  leaseExpiresAt: number;
  /** When the heartbeat that last extended the lease began (0: none yet, the claim's lease). */
  renewedAt: number;
  /** When the buffer first found the lease too short to start the handler (null: not found so). See Executor.startBuffered. */
  staleAt: number | null;
  /** Its outcome's write handed the slot it freed to another job of this worker (see Completer): no claim needs to follow. */
  handedOff?: boolean;
}

/**
 * The attempts a worker holds (claimed, running, or with an outcome not yet
 * recorded), by attemptKey (job id and lease token; one claim's jobs share a
 * token): an attempt's bookkeeping never touches another attempt of the same job.
 */
export type InFlight = Map<string, Attempt>;

export type Outcome =
  /** `result`: the handler's return value as JSON text, or null. */
  | { kind: "succeeded"; result: string | null }
  /** `timedOut`: the attempt passed its time limit. */
  | { kind: "failed"; error: string; timedOut: boolean }
  /** Interrupted by shutdown: hand back without spending an attempt. */
  | { kind: "released" };

/** An outcome to write, or one already recorded: the handler's `ctx.transaction` completed the job (`job`, as it wrote it). */
export type AttemptEnd = Outcome | { kind: "settled"; job: SettledJob };

/** Why an attempt was lost (a `lost` event's reason): the job was cancelled; its lease expired and a sweep took it; neither is known. */
export const LOST_CANCELLED = "cancelled";
export const LOST_RECLAIMED = "reclaimed (lease expired)";
export const LOST_UNKNOWN = "lease lost (cancelled or reclaimed)";

/** One attempt's identity: its job and the lease token its claim stamped. */
export function attemptKey(record: { id: number; leaseToken: string | null }): string {
  return `${record.id}:${record.leaseToken}`;
}

/** A claimed job's attempt, buffered and holding its lease from now on, added to `inFlight`. */
export function track(inFlight: InFlight, record: JobRecord): Attempt {
  const attempt: Attempt = {
    record,
    key: attemptKey(record),
    controller: new LazyAbort(),
    done: Promise.resolve(),
    phase: "buffered",
    leaseExpiresAt: record.leaseExpiresAt ?? 0,
    renewedAt: 0,
    staleAt: null,
  };
  inFlight.set(attempt.key, attempt);
  return attempt;
}
