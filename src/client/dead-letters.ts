/**
 * The dead-letter list (`docket.deadLetters`): reading dead jobs, replaying
 * one or all of them (each made due again with a fresh attempt budget), and
 * purging them, in bounded batches. Replays wake this docket's workers and
 * report `replayed` events.
 */
import type { DocketAdapter } from "../core/adapter.ts";
import type { Clock } from "../core/clock.ts";
import { InvalidArgumentError, NotFoundError } from "../core/errors.ts";
import { shown } from "../core/shown.ts";
import { toJob, type Job } from "../core/job.ts";
import { checkKeys, validateDuration, validateInteger, validateName } from "../core/validate.ts";
import type { LocalBus } from "./bus.ts";

/** Which dead jobs a bulk dead-letter operation takes: all, or those of one queue and/or task. */
export interface DeadLetterFilter {
  queue?: string;
  task?: string;
}

/** `docket.list`'s options without `state` (it is "dead"). */
export interface DeadLetterListOptions {
  queue?: string;
  task?: string;
  afterId?: number;
  /** Default 100, at most 10 000. */
  limit?: number;
}

/** The dead-letter list: jobs that used up their attempts. */
export interface DeadLetters {
  /** Dead jobs, oldest id first. */
  list(options?: DeadLetterListOptions): Promise<Job[]>;
  /**
   * Makes a dead job due again with a fresh attempt budget: it is stored
   * scheduled, due now, and the next claim of its queue stages it (ready, or
   * blocked while its concurrency key is full); this docket's workers are woken.
   * Of several concurrent replays of one job exactly one succeeds; the others
   * get NotFoundError (no such dead job). A job that is not dead: NotFoundError.
   * Its recorded steps (`ctx.step`) are kept, so its next attempt skips them,
   * unless `resetSteps` is true.
   */
  replay(id: number, options?: { resetSteps?: boolean }): Promise<Job>;
  /**
   * Replays every dead job that died before this call (of `queue` and
   * `task` when given; at most `limit`), in transactions of up to
   * DEAD_LETTER_BATCH jobs, skipping jobs another replay or purge holds
   * (they are that call's). Concurrent calls replay each job once: the
   * counts they return add up to the jobs replayed. A job that dies again
   * during the call is not replayed again by it. Returns how many it replayed.
   * Steps are kept or reset as by `replay`.
   */
  replayAll(options?: DeadLetterFilter & { limit?: number; resetSteps?: boolean }): Promise<{ replayed: number }>;
  /**
   * Deletes dead jobs that died at least `olderThanMs` ago (default 0: all;
   * of `queue` and `task` when given; at most `limit`), in transactions of
   * up to DEAD_LETTER_BATCH jobs, skipping jobs another replay or purge
   * holds. Returns how many it deleted.
   */
  purge(options?: DeadLetterFilter & { olderThanMs?: number; limit?: number }): Promise<{ deleted: number }>;
}

/** What the dead-letter list needs of its docket. */
export interface DeadLetterHost {
  readonly adapter: DocketAdapter;
  readonly clock: Clock;
  readonly bus: LocalBus;
  /** docket.list: validates and reads a page of jobs. */
  list(options: DeadLetterListOptions & { state: "dead" }): Promise<Job[]>;
}

/** Dead jobs per transaction of `replayAll` and `purge`. */
const DEAD_LETTER_BATCH = 500;

/** The dead-letter list of `host`; its functions need no `this` (they may be passed around). */
export function deadLetters(host: DeadLetterHost): DeadLetters {
  return {
    list: (options = {}) => {
      checkKeys(options, ["queue", "task", "afterId", "limit"], "deadLetters.list(options)");
      return host.list({ ...options, state: "dead" });
    },
    replay: async (id, options = {}) => {
      validateInteger(id, "id", 1, Number.MAX_SAFE_INTEGER);
      checkKeys(options, ["resetSteps"], "deadLetters.replay(id, options)");
      const resetSteps = resetStepsOf(options.resetSteps, "deadLetters.replay(id, options)");
      const record = await host.adapter.replay({ id, now: host.clock.now(), resetSteps });
      if (!record) throw new NotFoundError(id, `no dead job ${id} to replay`);
      host.bus.tellEnqueued(new Set([record.queue]), true);
      host.bus.publishJobs("replayed", [record]);
      return toJob(record);
    },
    replayAll: async (options = {}) => {
      checkKeys(options, ["queue", "task", "limit", "resetSteps"], "deadLetters.replayAll(options)");
      const resetSteps = resetStepsOf(options.resetSteps, "deadLetters.replayAll(options)");
      const filter = deadLetterFilter(options);
      const limit = options.limit === undefined ? Number.MAX_SAFE_INTEGER : validateInteger(options.limit, "limit", 1, Number.MAX_SAFE_INTEGER);
      const diedBefore = host.clock.now();
      let replayed = 0;
      while (replayed < limit) {
        const batch = Math.min(DEAD_LETTER_BATCH, limit - replayed);
        const records = await host.adapter.replayDead({ ...filter, diedBefore, limit: batch, now: host.clock.now(), resetSteps });
        replayed += records.length;
        if (records.length > 0) host.bus.tellEnqueued(new Set(records.map((r) => r.queue)), true);
        host.bus.publishJobs("replayed", records);
        if (records.length < batch) break;
      }
      return { replayed };
    },
    purge: async (options = {}) => {
      checkKeys(options, ["queue", "task", "olderThanMs", "limit"], "deadLetters.purge(options)");
      const filter = deadLetterFilter(options);
      const limit = options.limit === undefined ? Number.MAX_SAFE_INTEGER : validateInteger(options.limit, "limit", 1, Number.MAX_SAFE_INTEGER);
      const finishedBefore = host.clock.now() - validateDuration(options.olderThanMs ?? 0, "olderThanMs");
      let deleted = 0;
      while (deleted < limit) {
        const batch = Math.min(DEAD_LETTER_BATCH, limit - deleted);
        const n = await host.adapter.purge({ ...filter, states: ["dead"], finishedBefore, limit: batch });
        deleted += n;
        if (n < batch) break;
      }
      return { deleted };
    },
  };
}

function deadLetterFilter(options: DeadLetterFilter): DeadLetterFilter {
  const filter: DeadLetterFilter = {};
  if (options.queue !== undefined) filter.queue = validateName(options.queue, "queue");
  if (options.task !== undefined) filter.task = validateName(options.task, "task");
  return filter;
}

/** `resetSteps` as given: absent is false; anything but a boolean is InvalidArgumentError. */
function resetStepsOf(value: unknown, what: string): boolean {
  if (value === undefined) return false;
  if (typeof value !== "boolean") throw new InvalidArgumentError(`${what}: resetSteps must be a boolean, got ${shown(value)}`);
  return value;
}
