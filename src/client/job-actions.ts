/**
 * An operator's actions on one job, by id: cancel it, run a scheduled job
 * now, delete a finished one. Each is one guarded write: of concurrent
 * calls on one job one wins, the others get a typed error and write nothing.
 */
import type { DocketAdapter } from "../core/adapter.ts";
import type { Clock } from "../core/clock.ts";
import { InvalidStateError, NotFoundError } from "../core/errors.ts";
import { toJob, type Job } from "../core/job.ts";
import { TERMINAL_STATES } from "../core/states.ts";
import type { LocalBus } from "./bus.ts";
import { validateId } from "./reads.ts";

export interface JobActionHost {
  readonly adapter: DocketAdapter;
  readonly clock: Clock;
  readonly bus: LocalBus;
}

/** Throws the error for an action the job `id` refused: NotFoundError when there is no such job, else InvalidStateError naming its state. */
async function refused(host: JobActionHost, id: number, operation: string): Promise<never> {
  const current = await host.adapter.get({ id });
  if (!current) throw new NotFoundError(id);
  throw new InvalidStateError(id, current.state, operation);
}

/** See Docket.cancel. */
export async function cancelJob(host: JobActionHost, id: number): Promise<Job> {
  validateId(id);
  const record = await host.adapter.cancel({ id, now: host.clock.now() });
  if (!record) return refused(host, id, "cancel");
  host.bus.publishJobs("cancelled", [record]);
  host.bus.tellCancelled(record.id);
  return toJob(record);
}

/** See Docket.runNow. */
export async function runJobNow(host: JobActionHost, id: number): Promise<Job> {
  validateId(id);
  const record = await host.adapter.runNow({ id, now: host.clock.now() });
  if (!record) return refused(host, id, "run now");
  host.bus.tellEnqueued(new Set([record.queue]), true);
  return toJob(record);
}

/** See Docket.deleteJob. */
export async function deleteJob(host: JobActionHost, id: number): Promise<void> {
  validateId(id);
  // Any finish time: the state decides, not the age (a host whose clock is behind the finisher's still deletes it).
  const deleted = await host.adapter.purge({ states: TERMINAL_STATES, finishedBefore: Number.MAX_SAFE_INTEGER, limit: 1, id });
  if (deleted === 0) await refused(host, id, "delete");
}
