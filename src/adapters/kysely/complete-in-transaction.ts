/**
 * Completion in the handler's transaction (DocketAdapter.completeInTransaction):
 * the application's writes and the job's success commit together, fenced by
 * the lease token, or neither does (I16, R24).
 */
import type { FencedParams, SettledJob } from "../../core/adapter.ts";
import { LeaseLostError, UnsupportedError } from "../../core/errors.ts";
import type { AnyDb, Engine } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { settle } from "./outcomes.ts";

/** What `work` threw, kept apart so that it reaches the caller as thrown (not as an adapter error). */
export class WorkFailed {
  constructor(readonly error: unknown) {}
}

/**
 * In ONE transaction (never run again: `work` is application code): `work`
 * with the transaction (added to `own`, so `enqueue` accepts it as the
 * caller's transaction), then the fenced completion with its result, as
 * one `settle` item in that transaction. A refused completion throws
 * LeaseLostError (the transaction rolls back); `work`'s own error is
 * thrown wrapped in WorkFailed. With `client` (a driver connection the
 * caller holds, idle) the transaction is opened on it and `work` gets it
 * (Engine.transactionOnClient); an engine without that form throws
 * UnsupportedError before anything is sent.
 */
export function completeInTransaction(ctx: StoreContext, own: WeakSet<object>, params: FencedParams, work: (transaction: object) => Promise<string | null>, client?: object): Promise<SettledJob> {
  if (client !== undefined && ctx.engine.transactionOnClient === undefined) {
    return Promise.reject(new UnsupportedError(`ctx.transaction: the { client } form takes a pg client, on PostgreSQL only; on ${ctx.engine.name} use the kysely transaction it hands the handler`));
  }
  const open = client === undefined ? <T>(fn: (db: AnyDb) => Promise<T>) => ctx.engine.transactionOnce(ctx.db, fn) : <T>(fn: (db: AnyDb) => Promise<T>) => ctx.engine.transactionOnClient!(client, fn);
  return open(async (trx: AnyDb) => {
    own.add(trx);
    let result: string | null;
    try {
      result = await work(client ?? trx);
    } catch (error) {
      throw new WorkFailed(error);
    }
    const engine: Engine = { ...ctx.engine, writeTransaction: (_db, fn) => fn(trx), writeStatement: (_db, fn) => fn(trx) };
    const [settled] = await settle({ ...ctx, db: trx, engine, statements: new Map() }, { items: [{ kind: "complete", ...params, result }] });
    if (!settled) throw new LeaseLostError(params.id, "the job's success was not recorded, and the transaction rolled back: its lease is no longer held");
    return settled;
  });
}
