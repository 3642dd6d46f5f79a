/**
 * A handler's context (JobContext) for one attempt. `job` is a field;
 * `signal`, `progress`, `step`, `transaction` and `parents` are made when a
 * handler first reads them (most read none), then the same one is returned
 * on every read, so a handler may destructure the context.
 */
import { jobsOf } from "../core/dependencies.ts";
import { LeaseLostError } from "../core/errors.ts";
import type { Job, JobRecord } from "../core/job.ts";
import { serializePayload } from "../core/validate.ts";
import type { JobContext } from "./executor.ts";
import type { WorkerHost } from "./host.ts";
import type { LazyAbort } from "./lazy-abort.ts";
import { stepsOf, type StepFunction } from "./steps.ts";
import type { TransactionFunction } from "./transaction.ts";

export class HandlerContext implements JobContext {
  readonly #host: WorkerHost;
  readonly #record: JobRecord;
  readonly #controller: LazyAbort;
  #progress: ((value: unknown) => Promise<void>) | null = null;
  #step: StepFunction | null = null;
  #parents: (() => Promise<Job[]>) | null = null;
  /** Makes (once) and returns the attempt's ctx.transaction. */
  readonly #transaction: () => TransactionFunction;

  constructor(
    readonly job: Job,
    transaction: () => TransactionFunction,
    host: WorkerHost,
    record: JobRecord,
    controller: LazyAbort,
  ) {
    this.#transaction = transaction;
    this.#host = host;
    this.#record = record;
    this.#controller = controller;
  }

  get transaction(): TransactionFunction {
    return this.#transaction();
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** See JobContext.progress: fenced by the attempt's lease token. */
  get progress(): (value: unknown) => Promise<void> {
    const host = this.#host;
    const record = this.#record;
    return (this.#progress ??= async (value: unknown): Promise<void> => {
      const limit = host.payloadLimit();
      const text = serializePayload(value, typeof limit === "number" ? limit : await limit);
      const fence = { id: record.id, leaseToken: record.leaseToken!, now: host.clock.now() };
      if (!(await host.adapter.setProgress({ ...fence, progress: text }))) throw new LeaseLostError(record.id, "progress not recorded");
    });
  }

  get step(): StepFunction {
    return (this.#step ??= stepsOf(this.#host, this.#record));
  }

  /** See JobContext.parents: job `id`'s parents as stored now, in id order (a purged one left out). */
  get parents(): () => Promise<Job[]> {
    const host = this.#host;
    const id = this.#record.id;
    return (this.#parents ??= async () => jobsOf(host.adapter, (await host.adapter.dependencies({ id })).parents));
  }
}
