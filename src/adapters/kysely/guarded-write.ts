import type { JobRecord } from "../../core/job.ts";
import { endsJob, freesSlot, type TransitionEvent } from "../../core/transitions.ts";
import type { StoreContext } from "./context.ts";
import { applyTransition, type GuardKey } from "./guard.ts";
import { lockKey, rebalance } from "./admission.ts";
import { settleChildren } from "./dependencies.ts";

/** A guarded write's key, with what the caller knows of the job's concurrency key: a name, null (none), or undefined (unknown). */
export type TransitionKey = GuardKey & { id: number; concurrencyKey?: string | null };

/**
 * A guarded write as its own unit of work. When `event` can free a
 * concurrency slot, the job's key is locked first and rebalanced in the
 * same transaction (the next blocked job is promoted before commit).
 * A write that ends a job settles its children (see `settleChildren`) in
 * its transaction too. Returns the moved record, or null when the guard
 * matched nothing.
 */
export async function transition(ctx: StoreContext, event: TransitionEvent, key: TransitionKey, set: Record<string, unknown>): Promise<JobRecord | null> {
  const { db, engine } = ctx;
  if (!freesSlot(event)) return engine.writeStatement(db, (w) => applyTransition(ctx, w, event, key, set));
  if (key.concurrencyKey === null) {
    // The caller says the job has no key: no key to lock or rebalance, so one guarded statement,
    // which itself checks that the job has no key; a miss (lost race, or a key after all) takes the full path.
    // The same for a job with children to settle: it matches nothing here and takes the full path.
    const moved = await engine.writeStatement(db, (w) => applyTransition(ctx, w, event, key, set, { unkeyedOnly: true, childlessOnly: endsJob(event) }));
    return moved ?? transition(ctx, event, { ...key, concurrencyKey: undefined }, set);
  }
  return engine.writeTransaction(db, async (trx) => {
    // A job's key never changes, so reading it before taking the key's lock is safe.
    const row = (await trx.selectFrom(ctx.tables.jobs).select("concurrency_key").where("id", "=", key.id).executeTakeFirst()) as
      | { concurrency_key: string | null }
      | undefined;
    const ck = row?.concurrency_key ?? null;
    if (ck !== null) await lockKey(ctx, trx, ck);
    const moved = await applyTransition(ctx, trx, event, key, set);
    if (moved && ck !== null) await rebalance(ctx, trx, ck, key.now);
    // Its edges are read after its row lock was granted: an enqueue that named it as a parent has committed them.
    if (!moved || !endsJob(event)) return moved;
    const released = await settleChildren(ctx, trx, [moved], key.now);
    return released.length > 0 ? Object.assign(moved, { released }) : moved;
  });
}
