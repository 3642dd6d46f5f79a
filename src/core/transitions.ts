import { SLOT_HOLDING_STATES, type JobState } from "./states.ts";

/**
 * How a transition is fenced beyond its predecessor states:
 * - "none": state alone decides (cancel, replay);
 * - "lease": only the holder of the current lease token may write;
 * - "expired": only when the lease observed by the sweeper is still the
 *   current one AND has expired at `now` (a heartbeat in between wins);
 * - "due": only when `run_at <= now` (claim).
 */
export type Fence = "none" | "lease" | "expired" | "due";

export interface TransitionRule {
  readonly from: readonly JobState[];
  readonly to: JobState;
  readonly fence: Fence;
}

/**
 * The single source of truth for legal moves. Adapters derive the WHERE
 * clause of every state-changing write from this table:
 * `WHERE id = ? AND state IN (from) [AND fence]`.
 */
export const TRANSITIONS = {
  /** A due scheduled job is admitted: its key (if any) has a free slot. */
  stage: { from: ["scheduled"], to: "ready", fence: "due" },
  /** A due scheduled job whose concurrency key is full waits for a slot. */
  stageBlocked: { from: ["scheduled"], to: "blocked", fence: "due" },
  /** A due scheduled job whose key is full and whose policy is "discard" is dropped, with the reason. */
  stageDiscard: { from: ["scheduled"], to: "cancelled", fence: "due" },
  /** A blocked job gets the slot that just freed. */
  unblock: { from: ["blocked"], to: "ready", fence: "none" },
  /** A ready job starts running under a fresh lease. */
  claim: { from: ["ready"], to: "running", fence: "none" },
  /** The lease holder extends its lease; the state does not change. */
  heartbeat: { from: ["running"], to: "running", fence: "lease" },
  /** The lease holder finished the job. */
  complete: { from: ["running"], to: "succeeded", fence: "lease" },
  /** The lease holder failed an attempt and attempts are left. */
  retry: { from: ["running"], to: "scheduled", fence: "lease" },
  /** The lease holder failed the last attempt. */
  bury: { from: ["running"], to: "dead", fence: "lease" },
  /** Graceful shutdown hands the job back, keeping its slot; the attempt is not counted. */
  release: { from: ["running"], to: "ready", fence: "lease" },
  /** A sweeper found the lease expired and attempts are left. */
  expireRetry: { from: ["running"], to: "scheduled", fence: "expired" },
  /** A sweeper found the lease expired on the last attempt. */
  expireBury: { from: ["running"], to: "dead", fence: "expired" },
  /** Cancel anything not yet finished; a running job's lease is revoked. */
  cancel: { from: ["waiting", "scheduled", "ready", "blocked", "running"], to: "cancelled", fence: "none" },
  /**
   * A waiting job's last parent succeeded: it is scheduled at its own run
   * time and admitted through its controls when due, like any due job. The
   * write that records the parent's success makes it, in its transaction.
   */
  unwait: { from: ["waiting"], to: "scheduled", fence: "none" },
  /**
   * A dead job is scheduled again, due now, with a fresh attempt budget; it is
   * admitted through its concurrency key like any due job.
   */
  replay: { from: ["dead"], to: "scheduled", fence: "none" },
  /**
   * An operator makes a scheduled job (delayed, or waiting out a retry's
   * backoff) due now; it keeps its attempts and is admitted through its
   * controls like any due job.
   */
  runNow: { from: ["scheduled"], to: "scheduled", fence: "none" },
  /**
   * An enqueue with a debounce key merges into the key's pending job and sets
   * its run time (core/debounce.ts `mergedRunAt`): a job staged ready waits
   * again; one whose new run time is already due (its maxWaitMs reached) is
   * staged by the next claim. Debounced jobs never have a concurrency key
   * (that combination is refused), so this frees no slot; blocked is not a
   * predecessor for the same reason.
   */
  debounce: { from: ["scheduled", "ready"], to: "scheduled", fence: "none" },
} as const satisfies Record<string, TransitionRule>;

export type TransitionEvent = keyof typeof TRANSITIONS;

export const TRANSITION_EVENTS = Object.keys(TRANSITIONS) as TransitionEvent[];

/**
 * Pure planning: the state `event` moves a job in state `from` to, or null
 * when the move is illegal. Fences are checked by the adapter's write.
 */
export function planTransition(event: TransitionEvent, from: JobState): JobState | null {
  const rule: TransitionRule = TRANSITIONS[event];
  return rule.from.includes(from) ? rule.to : null;
}

/**
 * Whether `event` ends a job (succeeded, dead or cancelled): such a write
 * also settles the job's children (see EnqueueOptions.after) in its
 * transaction: released on success, cancelled otherwise.
 */
export function endsJob(event: TransitionEvent): boolean {
  const to: JobState = TRANSITIONS[event].to;
  return to === "succeeded" || to === "dead" || to === "cancelled";
}

/** The legal predecessor states of `event`, for a guarded write. */
export function predecessorsOf(event: TransitionEvent): readonly JobState[] {
  return TRANSITIONS[event].from;
}

/**
 * Whether `event` can free a concurrency slot: some predecessor holds a slot
 * and the target does not. A write for such an event promotes the key's next
 * blocked job in the same transaction.
 */
export function freesSlot(event: TransitionEvent): boolean {
  const rule: TransitionRule = TRANSITIONS[event];
  return rule.from.some((s) => SLOT_HOLDING_STATES.includes(s)) && !SLOT_HOLDING_STATES.includes(rule.to);
}
