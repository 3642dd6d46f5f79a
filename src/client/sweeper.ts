/**
 * The sweeper: the maintenance passes every worker runs and an operator may
 * call: reclaim jobs whose lease expired, purge finished jobs past their
 * retention, repair keys with free slots and blocked jobs. Each pass is safe
 * in every process at once (the adapter's guarded writes decide who moves a job).
 */
import type { DocketAdapter } from "../core/adapter.ts";
import type { Clock } from "../core/clock.ts";
import { toJob, type JobRecord } from "../core/job.ts";
import type { FailurePlan } from "../core/retry.ts";
import { checkKeys, validateInteger } from "../core/validate.ts";
import type { LocalBus } from "./bus.ts";

/** What `reclaimExpired` did: jobs whose expired lease it turned into a retry or a dead letter. */
export interface ReclaimResult {
  retried: number;
  dead: number;
}

/** How long finished jobs are kept, in ms; null: forever (see DocketOptions.retention). */
export interface Retention {
  finishedMs: number | null;
  deadMs: number | null;
}

/** What the sweeper needs of its docket. */
export interface SweeperHost {
  readonly adapter: DocketAdapter;
  readonly clock: Clock;
  readonly retention: Retention;
  readonly bus: LocalBus;
  /** Where a failed attempt of `job` goes at `now` (core/retry.ts planJobFailure under the docket's policy). */
  planFailure(job: JobRecord, now: number): FailurePlan;
}

/**
 * One sweep: every running job whose lease expired (at most `limit`)
 * counts as a failed attempt and is scheduled for retry or buried. Each
 * job is moved by exactly one sweeper; the winner reports `reclaimed`.
 */
export async function reclaimExpired(host: SweeperHost, limit: number): Promise<ReclaimResult> {
  const result: ReclaimResult = { retried: 0, dead: 0 };
  const now = host.clock.now();
  const expired = await host.adapter.listExpired({ now, limit });
  for (const job of expired) {
    const plan = host.planFailure(job, now);
    const moved = await host.adapter.expire({
      id: job.id,
      leaseToken: job.leaseToken!,
      now,
      concurrencyKey: job.concurrencyKey,
      error: `lease expired at ${new Date(job.leaseExpiresAt!).toISOString()} (worker stopped heartbeating)`,
      retryAt: plan.kind === "retry" ? plan.runAt : null,
    });
    if (!moved) continue;
    result[moved.state === "dead" ? "dead" : "retried"]++;
    if (host.bus.events.wants("reclaimed")) host.bus.events.emit({ type: "reclaimed", at: host.clock.now(), job: toJob(moved), error: moved.lastError ?? "" });
  }
  return result;
}

/** One retention pass (see Docket.purgeFinished): up to `limit` succeeded or cancelled jobs, and up to `limit` dead ones. */
export async function purgeFinished(host: SweeperHost, options: { limit?: number }): Promise<{ deleted: number }> {
  checkKeys(options, ["limit"], "purgeFinished(options)");
  const limit = validateInteger(options.limit ?? 1000, "limit", 1, 100_000);
  const now = host.clock.now();
  let deleted = 0;
  const { finishedMs, deadMs } = host.retention;
  if (finishedMs !== null) deleted += await host.adapter.purge({ states: ["succeeded", "cancelled"], finishedBefore: now - finishedMs, limit });
  if (deadMs !== null) deleted += await host.adapter.purge({ states: ["dead"], finishedBefore: now - deadMs, limit });
  return { deleted };
}

/** The keys maintenance pass (see Docket.repairKeys): the keys it repaired. */
export async function repairKeys(host: SweeperHost, options: { limit?: number }): Promise<{ repaired: string[] }> {
  checkKeys(options, ["limit"], "repairKeys(options)");
  const limit = validateInteger(options.limit ?? 100, "limit", 1, 100_000);
  return { repaired: await host.adapter.repairKeys({ now: host.clock.now(), limit }) };
}

/**
 * A worker's slow maintenance pass: purges finished jobs past their
 * retention, then repairs keys. A step that throws is passed to `failed`
 * and the next step still runs. Resolves to the keys repaired; never rejects.
 */
export async function maintain(host: SweeperHost, failed: (error: Error, step: "purge" | "repair") => void): Promise<string[]> {
  try {
    await purgeFinished(host, {});
  } catch (error) {
    failed(error as Error, "purge");
  }
  try {
    return (await repairKeys(host, {})).repaired;
  } catch (error) {
    failed(error as Error, "repair");
    return [];
  }
}
