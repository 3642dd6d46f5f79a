/** Completion in the handler's transaction: `ctx.transaction` (see JobContext.transaction). */
import type { WorkerHost } from "./host.ts";
import type { JobRecord } from "../core/job.ts";
import type { SettledJob } from "../core/adapter.ts";
import { InvalidArgumentError, LeaseLostError, PayloadTooLargeError, UnsupportedError } from "../core/errors.ts";
import { checkKeys, serializePayload } from "../core/validate.ts";

/** Options of `ctx.transaction`. */
export interface TransactionOptions {
  /** PostgreSQL: a `pg` Client or PoolClient to run the transaction on (idle; `fn` gets it); kept by the caller. */
  client?: object;
}

/**
 * The type of `ctx.transaction`; `Trx` is the adapter's kysely `Transaction`,
 * or with `{ client }` that client (annotate the parameter to type it).
 */
// deno-lint-ignore no-explicit-any
export type TransactionFunction = <T, Trx = any>(fn: (trx: Trx) => Promise<T>, options?: TransactionOptions) => Promise<T>;

/**
 * `ctx.transaction` for one attempt of `record`, and the job as the
 * transaction settled it (`settled`, once it committed: the attempt's
 * outcome is then recorded, and nothing the handler does after changes it),
 * and whether its transaction is open now (`running`).
 * `ending(true)` is called once `fn` returned, before the success is
 * written and committed, and returns false when the attempt has already
 * ended (its timeout passed, or the handler returned without awaiting the
 * transaction): then the transaction rolls back (LeaseLostError), as it
 * does where the database fences it, so no adapter commits the writes of
 * an attempt that is over. `ending(false)` if that write or commit failed.
 */
export function transactionOf(
  host: WorkerHost,
  record: JobRecord,
  ending?: (ending: boolean) => boolean,
): { run: TransactionFunction; settled: () => SettledJob | null; running: () => boolean } {
  let used = false;
  let open = false;
  let settled: SettledJob | null = null;
  const run = async <T, Trx>(fn: (trx: Trx) => Promise<T>, options?: TransactionOptions): Promise<T> => {
    const adapter = host.adapter;
    if (adapter.completeInTransaction === undefined) throw new UnsupportedError(`ctx.transaction: the ${adapter.name} adapter has no database transactions`);
    if (typeof fn !== "function") throw new InvalidArgumentError("ctx.transaction: expected a function (trx) => Promise<result>");
    // A misspelt option (`clinet`) would silently run on docket's own transaction instead of the caller's client.
    checkKeys(options, ["client"], "ctx.transaction(fn, options)");
    const client = options?.client;
    if (client !== undefined && (client === null || typeof client !== "object")) throw new InvalidArgumentError("ctx.transaction: { client } must be a pg Client or PoolClient");
    if (used) throw new InvalidArgumentError("ctx.transaction: called again in one attempt; it completes the job, so it runs at most once per attempt");
    used = true;
    const limit = await host.payloadLimit();
    let value!: T;
    const fence = { id: record.id, leaseToken: record.leaseToken!, now: host.clock.now(), concurrencyKey: record.concurrencyKey };
    open = true;
    let began = false;
    settled = await adapter.completeInTransaction(fence, async (trx) => {
      began = true;
      value = await fn(trx as Trx);
      fence.now = host.clock.now();
      if (ending?.(true) === false) throw new LeaseLostError(record.id, "the attempt ended (its timeout passed, or its handler returned) before its transaction committed: the transaction rolled back");
      if (value === undefined) return null;
      try {
        return serializePayload(value, limit, "result");
      } catch (error) {
        if (error instanceof PayloadTooLargeError) throw new PayloadTooLargeError(error.bytes, error.limit, "the transaction's result");
        throw error;
      }
    }, client === undefined ? undefined : { client })
      .catch((error: unknown) => {
        ending?.(false);
        // Refused before `fn` ran (a bad `{ client }`, a connection that failed): nothing ran, the call stays free.
        if (!began) used = false;
        throw error;
      })
      .finally(() => (open = false));
    return value;
  };
  return { run, settled: () => settled, running: () => open };
}
