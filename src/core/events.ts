/**
 * The events docket reports: the ONE list of their names (`EVENT_TYPES`),
 * the shape of each, and the worker's own view of them (`WorkerEvent`).
 * Everything that names an event type derives from this list.
 */
import type { DocketError } from "./errors.ts";
import type { Job } from "./job.ts";

/** Every event type, in the order of a job's life. `DocketEvent` has exactly these. */
export const EVENT_TYPES = ["enqueued", "started", "succeeded", "retried", "dead", "released", "cancelled", "reclaimed", "replayed", "lost", "keyRepaired", "error"] as const;

/**
 * The name of an event, one per member of DocketEvent (`docket.on(type, listener)`);
 * EVENT_TYPES lists them in the order of a job's life.
 * @useDeclaredType
 */
export type DocketEventType = (typeof EVENT_TYPES)[number];

/** Whether `type` names an event (one of EVENT_TYPES). */
export function isEventType(type: unknown): type is DocketEventType {
  return (EVENT_TYPES as readonly unknown[]).includes(type);
}

/** Which step of docket an `error` event comes from. */
export type EventOperation = "claim" | "heartbeat" | "complete" | "fail" | "release" | "reclaim" | "purge" | "repair" | "connection";

/**
 * What docket reports, one event per transition, from the process whose
 * write won it (a transition another process won is that process's event):
 * summed over every process, each transition is reported exactly once;
 * except a dependency's cascade (waiting children cancelled by a parent
 * that ended dead or cancelled, or released by its success), which the
 * parent's own event stands for. `at` is the docket clock's time when the
 * winning write returned.
 */
export type DocketEvent =
  /** A job this docket created (not a holder returned for a held idempotency key; not one enqueued in the caller's transaction, whose commit docket cannot see). */
  | { type: "enqueued"; at: number; job: Job }
  /** A worker of this docket claimed the job and is about to run its handler (`job.attempt` is this attempt). */
  | { type: "started"; at: number; job: Job }
  | { type: "succeeded"; at: number; job: Job }
  /** The attempt failed and the job is scheduled again at `job.runAt`. */
  | { type: "retried"; at: number; job: Job; error: string }
  /** The attempt failed and the job used up its attempts (or its error was not retryable). */
  | { type: "dead"; at: number; job: Job; error: string }
  /** A graceful stop gave the job back unrun (the attempt does not count). */
  | { type: "released"; at: number; job: Job }
  | { type: "cancelled"; at: number; job: Job }
  /** A sweep of this docket found the job's lease expired (its worker stopped heartbeating) and retried or buried it. */
  | { type: "reclaimed"; at: number; job: Job; error: string }
  /** A dead job made due again (deadLetters.replay or replayAll). */
  | { type: "replayed"; at: number; job: Job }
  /** A worker of this docket lost its lease on the job (cancelled, reclaimed, or its outcome could not be written in time): another write won. */
  | { type: "lost"; at: number; job: Job; reason: string }
  /** The keys maintenance pass promoted blocked jobs of `key`, which had free slots. */
  | { type: "keyRepaired"; at: number; key: string }
  /** An error a worker of this docket survived; `retryInMs`: when the failed step is tried again. */
  | { type: "error"; at: number; error: DocketError | Error; operation: EventOperation; retryInMs?: number };

export type EventOf<E extends DocketEventType> = Extract<DocketEvent, { type: E }>;

/** Compile-time: DocketEvent has one member per name of EVENT_TYPES, and no other. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const eventsMatchTheList: Same<DocketEvent["type"], DocketEventType> = true;
void eventsMatchTheList;

/** The events only a Docket reports (a worker's `onEvent` never sees them). */
export type DocketOnlyEventType = "enqueued" | "cancelled" | "reclaimed" | "replayed";

/** An event's name on a worker's own `onEvent`: `retried` is `retry` there; every other name is the same. */
export type WorkerEventName<E extends DocketEventType> = E extends "retried" ? "retry" : E;

/**
 * What a worker reports to its own `onEvent`: the events of DocketEvent a
 * worker wins or survives, without `at`, `retried` named `retry`. Each
 * fires at most once per attempt, from the worker that won the transition.
 */
export type WorkerEvent = {
  [E in Exclude<DocketEventType, DocketOnlyEventType>]: Omit<EventOf<E>, "type" | "at"> & { type: WorkerEventName<E> };
}[Exclude<DocketEventType, DocketOnlyEventType>];
