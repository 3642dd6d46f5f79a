/**
 * A Docket's in-process notices: the event listeners of `docket.on`
 * (EventHub), and the wake-ups its workers subscribe to (queues with jobs
 * just enqueued or made due, jobs just cancelled, queues just paused or
 * resumed). Nothing here crosses a
 * process; every notice follows a write that committed.
 */
import type { Clock } from "../core/clock.ts";
import type { DocketEvent, DocketEventType } from "../core/events.ts";
import { toJob, type JobRecord } from "../core/job.ts";

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

/** One Docket's events and wake-ups. A listener's failure never fails the write it follows. */
export class LocalBus {
  readonly events = new EventHub();
  /** Workers of this docket, told about the queues of ready jobs it just enqueued (null: any queue may have some). */
  readonly #enqueueListeners = new Set<(queues: ReadonlySet<string> | null, due: boolean) => void>();
  /** Workers of this docket, told about the run times of the scheduled jobs it just stored. */
  readonly #scheduleListeners = new Set<(jobs: readonly { queue: string; runAt: number }[]) => void>();
  /** Workers of this docket, told about the jobs it cancelled. */
  readonly #cancelListeners = new Set<(id: number) => void>();
  /** Workers of this docket, told about the queues it paused or resumed. */
  readonly #pauseListeners = new Set<(queue: string, paused: boolean) => void>();

  /** Workers of this docket that run: stopped by `close()` before the adapter closes. */
  readonly #closeListeners = new Set<() => Promise<void>>();
  #closed = false;

  constructor(readonly clock: Clock) {}

  /** Whether `close()` was called: a worker of this docket does not start. */
  get closed(): boolean {
    return this.#closed;
  }

  onClose(listener: () => Promise<void>): () => void {
    this.#closeListeners.add(listener);
    return () => void this.#closeListeners.delete(listener);
  }

  /** Marks the docket closed and resolves once every listener (a running worker's stop) has settled; their failures are theirs. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled([...this.#closeListeners].map((listener) => listener()));
  }

  onEnqueued(listener: (queues: ReadonlySet<string> | null, due: boolean) => void): () => void {
    this.#enqueueListeners.add(listener);
    return () => void this.#enqueueListeners.delete(listener);
  }

  onScheduled(listener: (jobs: readonly { queue: string; runAt: number }[]) => void): () => void {
    this.#scheduleListeners.add(listener);
    return () => void this.#scheduleListeners.delete(listener);
  }

  /**
   * Tells every schedule listener the queue and run time of each of
   * `records` that is scheduled for later (a delayed job, or one a debounce
   * merge moved); nothing when none listens. A job scheduled and already due
   * (a keyed job left to the next staging claim) is not told: a stage request
   * per such job would make every claim stage.
   */
  tellScheduled(records: readonly JobRecord[]): void {
    if (this.#scheduleListeners.size === 0) return;
    const now = this.clock.now();
    const jobs = records.filter((r) => r.state === "scheduled" && r.runAt > now);
    if (jobs.length === 0) return;
    for (const listener of this.#scheduleListeners) {
      try {
        listener(jobs);
      } catch {
        // A listener's failure must not fail the enqueue that committed.
      }
    }
  }

  onCancelled(listener: (id: number) => void): () => void {
    this.#cancelListeners.add(listener);
    return () => void this.#cancelListeners.delete(listener);
  }

  onPaused(listener: (queue: string, paused: boolean) => void): () => void {
    this.#pauseListeners.add(listener);
    return () => void this.#pauseListeners.delete(listener);
  }

  /** `write`'s result once it committed, after telling every pause listener that `queue` is now `paused` (or resumed). */
  afterPause<R>(write: Promise<R>, queue: string, paused: boolean): Promise<R> {
    return write.then((control) => {
      for (const listener of this.#pauseListeners) {
        try {
          listener(queue, paused);
        } catch {
          // A listener's failure must not fail the write that committed.
        }
      }
      return control;
    });
  }

  /**
   * Tells every enqueue listener about `queues` (`due`: jobs a replay made
   * due, which a claim must stage; null: any queue, after a control change
   * that may let waiting jobs start).
   */
  tellEnqueued(queues: ReadonlySet<string> | null, due: boolean): void {
    for (const listener of this.#enqueueListeners) {
      try {
        listener(queues, due);
      } catch {
        // A listener's failure must not fail the enqueue that committed.
      }
    }
  }

  /** `write`'s result once it committed, after waking the workers of `queue` (null: every one): a control change may let waiting jobs start. */
  afterControl<R>(write: Promise<R>, queue: string | null): Promise<R> {
    return write.then((control) => (this.tellEnqueued(queue === null ? null : new Set([queue]), false), control));
  }

  tellCancelled(id: number): void {
    for (const listener of this.#cancelListeners) {
      try {
        listener(id);
      } catch {
        // A listener's failure must not fail the cancel that committed.
      }
    }
  }

  /** Emits one `type` event per record, at the clock's time; builds nothing when nobody listens. */
  publishJobs(type: "enqueued" | "cancelled" | "replayed", records: readonly JobRecord[]): void {
    if (records.length === 0 || !this.events.wants(type)) return;
    const at = this.clock.now();
    for (const r of records) this.events.emit({ type, at, job: toJob(r) });
  }
}
