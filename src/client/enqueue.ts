/**
 * Storing jobs: validates every enqueue item (TaskRegistry.newJob), checks
 * payloads against the database's limit, wraps the write in the tracing
 * hook, writes all items in one adapter call, then wakes this docket's
 * workers and reports `enqueued` events. Also the types of an enqueue's
 * options and result that are not a job's own.
 */
import type { DocketAdapter, NewJob } from "../core/adapter.ts";
import { parseAfter, resolveAfter } from "../core/dependencies.ts";
import type { Clock } from "../core/clock.ts";
import { InvalidArgumentError } from "../core/errors.ts";
import { toJob, type Job, type TaskMap } from "../core/job.ts";
import { shown } from "../core/shown.ts";
import type { LocalBus } from "./bus.ts";
import { laneOf, type DebounceLanes } from "./debounce-lanes.ts";
import type { PayloadLimit } from "./payload-limit.ts";
import type { EnqueueItem, TaskRegistry } from "./tasks.ts";

/**
 * A wrapper around every enqueue call: it gets the jobs about to be
 * stored and must call `store` once, with the trace context to store with
 * them (a propagation carrier as JSON text, or null), returning its result.
 * What it throws fails the enqueue. docket/otel implements it.
 */
export interface EnqueueTracing {
  enqueue<R>(jobs: readonly { task: string; queue: string }[], store: (traceContext: string | null) => Promise<R>): Promise<R>;
}

/**
 * Enqueue in the caller's own open transaction: a kysely `Transaction` on the
 * adapter's database (every adapter) or, on PostgreSQL, a `pg` client inside
 * BEGIN. The jobs exist if and only if that transaction commits.
 */
export interface InTransaction {
  transaction?: object;
}

/** What `enqueue` returns: the job, and whether this call created it (false: its idempotency key was held by this job). */
export type EnqueuedJob<P = unknown> = Job<P> & { created: boolean };

/** What storing jobs needs of its docket. */
export interface EnqueueHost {
  readonly adapter: DocketAdapter;
  readonly clock: Clock;
  readonly tasks: TaskRegistry;
  readonly payloadLimit: PayloadLimit;
  readonly tracing: EnqueueTracing | null;
  /** See DocketOptions.idempotency. */
  readonly keyHoldAfterFinishMs: number | null;
  readonly bus: LocalBus;
  /** Where this process's concurrent debounced enqueues of one key are coalesced (see debounce-lanes.ts). */
  readonly debounceLanes: DebounceLanes;
}

/**
 * Validates `items` (named `${label}[i]` in messages; "": the one job of
 * `enqueue`), then stores them in one transaction (the caller's when
 * `transaction` is given): all or none. Bad input throws before anything is
 * written.
 */
export async function enqueueItems<T extends TaskMap>(
  host: EnqueueHost,
  items: readonly EnqueueItem<T>[],
  transaction: object | undefined,
  label: string,
): Promise<EnqueuedJob<T[keyof T]>[]> {
  if (transaction !== undefined && (typeof transaction !== "object" || transaction === null)) {
    throw new InvalidArgumentError(`transaction must be the caller's open transaction (an object), got ${shown(transaction)}`);
  }
  const now = host.clock.now();
  const jobs = withParents(items, items.map((item, i) => host.tasks.newJob(item, now, label === "" ? "" : `${label}[${i}].`)), label);
  const checking = host.payloadLimit.check(
    jobs.map((j) => j.payload),
    transaction,
  );
  if (checking) await checking;
  const hold = host.keyHoldAfterFinishMs;
  const store = (traceContext: string | null) => {
    const params = {
      jobs: traceContext === null ? jobs : jobs.map((j) => ({ ...j, traceContext })),
      now,
      ...(hold === null ? {} : { keysReleasedBefore: now - hold }),
      ...(transaction === undefined ? {} : { transaction }),
    };
    const lane = laneOf(params);
    return lane === null ? host.adapter.enqueue(params) : host.debounceLanes.enqueue(lane, params);
  };
  const records = host.tracing === null ? await store(null) : await host.tracing.enqueue(jobs, store);
  // In the caller's transaction the jobs exist only once it commits, which docket cannot see: no local wake-up
  // (workers find them at their next poll; on PostgreSQL the NOTIFY sent in the transaction wakes them at commit).
  const ready = new Set(records.filter((r) => r.created && r.state === "ready").map((r) => r.queue));
  if (ready.size > 0 && transaction === undefined) host.bus.tellEnqueued(ready, false);
  // Delayed jobs: this docket's workers stage each at its run time, not at their next poll after it.
  if (transaction === undefined) host.bus.tellScheduled(records);
  if (transaction === undefined) host.bus.publishJobs("enqueued", records.filter((r) => r.created));
  // Each job marked in place (`toJob` returns a fresh object): a spread copy of its 30 fields per job cost more than the rest of the call's JS.
  return records.map((r) => {
    const job = toJob<T[keyof T]>(r) as Job<T[keyof T]> & { created: boolean };
    job.created = r.created;
    return job;
  });
}

/**
 * `jobs` with their parents (EnqueueOptions.after) validated and each item's
 * refs resolved to batch indexes (see resolveAfter); `jobs` itself when no
 * item names parents or a ref.
 */
function withParents<T extends TaskMap>(items: readonly EnqueueItem<T>[], jobs: NewJob[], label: string): NewJob[] {
  const inBatch = label !== "";
  const names = items.map((item, i) => {
    const ref = inBatch ? item.ref : undefined;
    if (ref !== undefined && (typeof ref !== "string" || ref.length === 0)) throw new InvalidArgumentError(`${label}[${i}].ref must be a non-empty string, got ${shown(ref)}`);
    return ref;
  });
  const afters = items.map((item, i) => {
    const after = item.options?.after;
    return after === undefined ? null : parseAfter(after, inBatch ? `${label}[${i}].options.` : "options.", inBatch);
  });
  if (afters.every((a) => a === null) && names.every((n) => n === undefined)) return jobs;
  const keys = items.map((item) => (typeof item.options?.idempotencyKey === "string" ? item.options.idempotencyKey : undefined));
  const specs = resolveAfter(names, afters, label, keys);
  // `jobs` are fresh (one `newJob` each): the specs are set in place, not on copies.
  specs.forEach((spec, i) => {
    if (spec !== null) (jobs[i] as { after?: NewJob["after"] }).after = spec;
  });
  return jobs;
}
