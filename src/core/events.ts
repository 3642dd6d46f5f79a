import type { DocketError } from "./errors.ts";
import type { Job } from "./job.ts";

/** Which step of docket an `error` event comes from. */
export type EventOperation = "claim" | "heartbeat" | "complete" | "fail" | "release" | "reclaim" | "purge" | "repair" | "connection";

/**
 * What docket reports, one event per transition, from the process whose
 * write won it (a transition another process won is that process's event):
 * summed over every process, each transition is reported exactly once.
 * `at` is the docket clock's time when the winning write returned.
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

export type DocketEventType = DocketEvent["type"];
export type EventOf<E extends DocketEventType> = Extract<DocketEvent, { type: E }>;

/** Listeners by event type ("*": every event). A listener that throws does not affect docket or the other listeners. */
export class EventHub {
  readonly #listeners = new Map<string, Set<(event: DocketEvent) => void>>();

  on(type: DocketEventType | "*", listener: (event: DocketEvent) => void): () => void {
    const set = this.#listeners.get(type) ?? new Set();
    set.add(listener);
    this.#listeners.set(type, set);
    return () => void set.delete(listener);
  }

  /** Whether anything listens for `type`: lets a caller skip building an event nobody reads. */
  wants(type: DocketEventType): boolean {
    return (this.#listeners.get(type)?.size ?? 0) > 0 || (this.#listeners.get("*")?.size ?? 0) > 0;
  }

  emit(event: DocketEvent): void {
    for (const key of [event.type, "*"]) {
      for (const listener of this.#listeners.get(key) ?? []) {
        try {
          listener(event);
        } catch {
          // An observer's failure must not affect the job or other observers.
        }
      }
    }
  }
}
