/**
 * The worker's events (WorkerEvent) and their fan-out: each event is logged
 * (where it warrants a line), passed to the `onEvent` observer, and
 * published on the docket's event stream when something listens there.
 */
import type { WorkerHost } from "./host.ts";
import type { DocketError } from "../core/errors.ts";
import type { DocketEvent, EventOperation, WorkerEvent } from "../core/events.ts";
import type { Job } from "../core/job.ts";
import { messageOf } from "../core/thrown.ts";
import { LOST_CANCELLED } from "./attempt.ts";
import { attemptLabel, oneLine, type WorkerLog } from "./log.ts";

/** Which step of the worker an `error` event comes from. */
export type WorkerOperation = EventOperation;

/** Emitted only by the winner of a transition, each at most once per attempt: derived from core/events.ts, the one list of events. */
export type { WorkerEvent };

/** Sends each event to the log, the observer and the docket's stream. `emit` never throws. */
export class Emitter {
  readonly #host: WorkerHost;
  readonly #onEvent: ((event: WorkerEvent) => void) | null;
  readonly log: WorkerLog;

  constructor(host: WorkerHost, onEvent: ((event: WorkerEvent) => void) | null, log: WorkerLog) {
    this.#host = host;
    this.#onEvent = onEvent;
    this.log = log;
  }

  /**
   * Whether an event of `type` that logs nothing (started, succeeded,
   * released) reaches anyone: the observer, or a docket listener. When not,
   * a caller may skip building it.
   */
  wants(type: "started" | "succeeded" | "released"): boolean {
    return this.#onEvent !== null || this.#host.listens(type);
  }

  emit(event: WorkerEvent): void {
    if (event.type === "error") {
      const retry = event.retryInMs === undefined ? "" : ` (retrying in ${event.retryInMs} ms)`;
      this.log.warn(`${event.operation} failed${retry}: ${oneLine(messageOf(event.error))}`);
    } else if (event.type === "keyRepaired") {
      this.log.warn(`concurrency key ${oneLine(JSON.stringify(event.key))} had blocked jobs and free slots; promoted them`);
    } else if (event.type === "lost") {
      if (event.reason === LOST_CANCELLED) this.log.info(`${attemptLabel(event.job)} cancelled`);
      else this.log.warn(`${attemptLabel(event.job)} lost: ${event.reason}`);
    }
    try {
      this.#onEvent?.(event);
    } catch {
      // An observer's failure must not affect the job.
    }
    // Built only when the docket has a listener for it: a worker without observers pays two map lookups per event.
    if (this.#host.listens(docketTypeOf(event))) this.#host.publish(toDocketEvent(event, this.#host.clock.now()));
  }
}

/** A worker event's type on the docket-level stream (`retry` is `retried` there). */
function docketTypeOf(event: WorkerEvent): DocketEvent["type"] {
  return event.type === "retry" ? "retried" : event.type;
}

/** The docket-level form of a worker event. */
function toDocketEvent(event: WorkerEvent, at: number): DocketEvent {
  if (event.type === "retry") return { type: "retried", at, job: event.job, error: event.error };
  return { ...event, at };
}
