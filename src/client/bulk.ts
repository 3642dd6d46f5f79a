/**
 * Actions on every job a filter selects (`docket.bulk`): count them, then
 * apply one action to each, one guarded write per job, as the single-job
 * actions do (so each keeps their guarantees: a keyed job's slot passes on,
 * a cancelled parent settles its children). A job that moved on meanwhile
 * (another worker claimed, finished or deleted it) is skipped, not forced.
 */
import type { CountParams } from "../core/adapter.ts";
import { DocketError, InvalidArgumentError } from "../core/errors.ts";
import { BULK_ACTIONS, bulkRefusal, isBulkAction, type BulkAction } from "../core/bulk.ts";
import { JOB_STATES, isJobState, type JobState } from "../core/states.ts";
import { shown } from "../core/shown.ts";
import { checkKeys, validateInteger, validateName } from "../core/validate.ts";
import { cancelJob, deleteJob, runJobNow, type JobActionHost } from "./job-actions.ts";

export type { BulkAction } from "../core/bulk.ts";

/** Which jobs: a state (required: it decides what the action means), and optionally a queue, task and concurrency key. */
export interface BulkFilter {
  state: JobState;
  queue?: string;
  task?: string;
  concurrencyKey?: string;
}

export interface BulkHost extends JobActionHost {
  replay(id: number): Promise<unknown>;
}

/** Each page of ids read, then acted on; a bulk call reads at most `limit` jobs. */
const PAGE = 500;

export class BulkActions {
  /** @internal `docket.bulk` is the docket's own. */
  constructor(
    /** @internal What the actions need of their docket. */
    readonly host: BulkHost,
  ) {}

  /** How many jobs `filter` selects now (the exact number to confirm before `apply`). Reads only. */
  async count(filter: BulkFilter): Promise<number> {
    return this.host.adapter.countJobs(checkedFilter(filter));
  }

  /**
   * Applies `action` to the jobs `filter` selects, oldest id first, at most
   * `limit` of them (the count an operator confirmed; default: all). Returns
   * how many it changed, and how many it skipped because they had moved on.
   * InvalidArgumentError, before anything is written, for an action the
   * filter's state does not allow (cancel takes live states, delete finished
   * ones, run-now scheduled, replay dead).
   */
  async apply(action: BulkAction, filter: BulkFilter, options: { limit?: number } = {}): Promise<{ applied: number; skipped: number }> {
    if (!isBulkAction(action)) throw new InvalidArgumentError(`a bulk action is one of ${Object.keys(BULK_ACTIONS).join(", ")}, got ${shown(action)}`);
    const f = checkedFilter(filter);
    checkKeys(options, ["limit"], "apply(options)");
    const limit = options.limit === undefined ? Number.MAX_SAFE_INTEGER : validateInteger(options.limit, "limit", 0, Number.MAX_SAFE_INTEGER);
    const refusal = bulkRefusal(action, f.state!);
    if (refusal !== null) throw new InvalidArgumentError(refusal);
    const one = (id: number): Promise<unknown> =>
      action === "cancel" ? cancelJob(this.host, id) : action === "delete" ? deleteJob(this.host, id) : action === "run-now" ? runJobNow(this.host, id) : this.host.replay(id);
    let applied = 0;
    let skipped = 0;
    let afterId = 0;
    for (let seen = 0; seen < limit; ) {
      const page = await this.host.adapter.list({ ...f, afterId, limit: Math.min(PAGE, limit - seen) });
      if (page.length === 0) break;
      for (const job of page) {
        try {
          await one(job.id);
          applied++;
        } catch (error) {
          // NOT_FOUND, INVALID_STATE: the job moved on since it was read; anything else (a lost connection) stops the call.
          if (!(error instanceof DocketError) || (error.code !== "NOT_FOUND" && error.code !== "INVALID_STATE")) throw error;
          skipped++;
        }
      }
      seen += page.length;
      afterId = page[page.length - 1]!.id;
    }
    return { applied, skipped };
  }
}

function checkedFilter(filter: BulkFilter): CountParams {
  if (typeof filter !== "object" || filter === null) throw new InvalidArgumentError(`a bulk filter is an object { state, queue?, task?, concurrencyKey? }, got ${shown(filter)}`);
  checkKeys(filter, ["state", "queue", "task", "concurrencyKey"], "filter");
  if (!isJobState(filter.state)) throw new InvalidArgumentError(`filter.state must be one of ${JOB_STATES.join(", ")}, got ${shown(filter.state)}`);
  return {
    state: filter.state,
    ...(filter.queue === undefined ? {} : { queue: validateName(filter.queue, "filter.queue") }),
    ...(filter.task === undefined ? {} : { task: validateName(filter.task, "filter.task") }),
    ...(filter.concurrencyKey === undefined ? {} : { concurrencyKey: validateName(filter.concurrencyKey, "filter.concurrencyKey") }),
  };
}
