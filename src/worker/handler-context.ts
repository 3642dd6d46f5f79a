/**
 * A handler's context (JobContext) for one attempt. `job` is a field;
 * `signal`, `progress`, `step`, `transaction` and `parents` are made when a
 * handler first reads them (most read none), then the same one is returned
 * on every read, so a handler may destructure the context.
 */
import { jobsOf } from "../core/dependencies.ts";
import { InvalidArgumentError, LeaseLostError } from "../core/errors.ts";
import type { Job, JobRecord } from "../core/job.ts";
import { serializePayload } from "../core/validate.ts";
import type { WorkerHost } from "./host.ts";
import type { LazyAbort } from "./lazy-abort.ts";
import { stepsOf, type StepFunction } from "./steps.ts";
import type { TransactionFunction } from "./transaction.ts";

/** The attempt's ctx.transaction, made (once) when first read, and whether its transaction is open now. */
export interface AttemptTransaction {
  run(): TransactionFunction;
  open(): boolean;
  /** Whether the worker knows this attempt's lease lost (cancelled, reclaimed): nothing of the handler's may run or be recorded. */
  lost(): boolean;
}

/** What a handler gets besides its payload. */
export interface JobContext<P = unknown> {
  job: Job<P>;
  /**
   * Aborted when the worker stops (graceful shutdown; reason
   * WorkerStoppingError: a success within the stop's timeout is recorded,
   * a throw once the signal aborted releases the job unspent, as the timeout
   * does), when the job's lease is lost
   * (JobLeaseLostError: cancelled, or reclaimed after missed heartbeats;
   * nothing is recorded), or when the attempt's time limit passes
   * (JobTimeoutError: the attempt has failed). A handler should stop soon after.
   */
  signal: AbortSignal;
  /**
   * Records `value` (JSON, bounded like payloads) as the job's progress,
   * readable through `docket.get` while it runs. Fenced by the lease: when
   * the attempt no longer holds it, rejects with LeaseLostError and writes nothing.
   */
  progress(value: unknown): Promise<void>;
  /**
   * A durable step: when this job recorded a step named `name` (in this or
   * an earlier attempt), resolves to its stored result without calling
   * `fn`; otherwise calls `fn`, records its result (JSON, bounded like
   * payloads; undefined is stored as null) fenced by the lease, and
   * resolves to the result as stored. A step whose record fails is not
   * recorded, and runs again in the next attempt: exactly once holds for
   * the steps recorded. Rejects with LeaseLostError (writing nothing) when
   * the attempt no longer holds the lease, with InvalidArgumentError for a
   * name that is not a non-empty string or that this attempt used already
   * (names are unique within a job), and with InvalidPayloadError or
   * PayloadTooLargeError for a result that cannot be stored.
   */
  step: StepFunction;
  /**
   * Completion in the handler's transaction: runs `fn` in ONE transaction on
   * the adapter's database, handing it the transaction (a kysely
   * `Transaction`; `docket.enqueue(…, { transaction: trx })` takes it, so
   * follow-up jobs exist only if it commits), and records the job's success
   * in that same transaction, fenced by the attempt's lease, with `fn`'s
   * return value as the job's result. Resolves to that value once it
   * committed: the job has succeeded, whatever the handler does after. When
   * the lease was lost (cancelled, reclaimed, expired) the transaction
   * rolls back, so none of `fn`'s writes survive, and it rejects with
   * LeaseLostError; when `fn` throws, it rolls back and rejects with that
   * error (the handler's outcome decides, as usual). At most once per
   * attempt (InvalidArgumentError after); UnsupportedError on an adapter
   * without transactions (the memory adapter). Write through `trx` only:
   * on SQLite, other docket writes of this process wait until it ends.
   * On PostgreSQL, `ctx.transaction(fn, { client })` takes a `pg` Client or
   * PoolClient the handler holds, idle: BEGIN and COMMIT are sent on it and
   * `fn` gets that client (`enqueue` takes it as `transaction` too); the
   * caller keeps and releases it.
   */
  transaction: TransactionFunction;
  /**
   * This job's parents (EnqueueOptions.after), in id order, as stored now:
   * for a child released by their success, each has succeeded and carries
   * its `result`. Empty for a job without parents; a purged parent is left
   * out. Reads only.
   */
  parents(): Promise<Job[]>;
}

export class HandlerContext implements JobContext {
  readonly #host: WorkerHost;
  readonly #record: JobRecord;
  readonly #controller: LazyAbort;
  #progress: ((value: unknown) => Promise<void>) | null = null;
  #step: StepFunction | null = null;
  #parents: (() => Promise<Job[]>) | null = null;
  readonly #transaction: AttemptTransaction;

  constructor(
    readonly job: Job,
    transaction: AttemptTransaction,
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
    const run = this.#transaction.run();
    return (fn, options) => {
      // Known lost: `fn` is not called (its writes could only roll back, and what it does outside the database would run for a job already given up).
      if (this.#transaction.lost()) return Promise.reject(new LeaseLostError(this.#record.id, "ctx.transaction not run: the attempt's lease is lost (the job was cancelled or reclaimed)"));
      return run(fn, options);
    };
  }

  /**
   * Refuses a write of its own (a step's record, progress) while this
   * attempt's ctx.transaction is open on a store with one writer at a time
   * (SQLite): that write would wait for the transaction, which waits for
   * the handler: a hang, never an error.
   */
  #checkOwnWrite(what: string): void {
    if (this.#transaction.open() && this.#host.adapter.capabilities?.rowLocks !== true) {
      throw new InvalidArgumentError(
        `${what} inside ctx.transaction: on ${this.#host.adapter.name} (one writer at a time) its write would wait for the transaction, which waits for it; call it before or after ctx.transaction`,
      );
    }
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** See JobContext.progress: fenced by the attempt's lease token. */
  get progress(): (value: unknown) => Promise<void> {
    const host = this.#host;
    const record = this.#record;
    return (this.#progress ??= async (value: unknown): Promise<void> => {
      this.#checkOwnWrite("ctx.progress");
      const limit = host.payloadLimit();
      const text = serializePayload(value, typeof limit === "number" ? limit : await limit, "progress");
      const fence = { id: record.id, leaseToken: record.leaseToken!, now: host.clock.now() };
      if (!(await host.adapter.setProgress({ ...fence, progress: text }))) throw new LeaseLostError(record.id, "progress not recorded");
    });
  }

  get step(): StepFunction {
    return (this.#step ??= stepsOf(this.#host, this.#record, (name) => {
      // Known lost: `fn` is not called (its record would be refused, and its effect would run for a job already given up).
      if (this.#transaction.lost()) throw new LeaseLostError(this.#record.id, `step ${JSON.stringify(name)} not run: the attempt's lease is lost (the job was cancelled or reclaimed)`);
      this.#checkOwnWrite("ctx.step");
    }));
  }

  /** See JobContext.parents: job `id`'s parents as stored now, in id order (a purged one left out). */
  get parents(): () => Promise<Job[]> {
    const host = this.#host;
    const id = this.#record.id;
    return (this.#parents ??= async () => jobsOf(host.adapter, (await host.adapter.dependencies({ id })).parents));
  }
}
