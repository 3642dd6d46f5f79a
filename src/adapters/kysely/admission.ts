import { sql, type ExpressionBuilder } from "kysely";
import { TRANSITIONS } from "../../core/transitions.ts";
import { SLOT_HOLDING_STATES, type JobState } from "../../core/states.ts";
import { admit, discardReason, freeSlots } from "../../core/concurrency.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { applyTransition, guard } from "./guard.ts";
import { settleChildren } from "./dependencies.ts";
import { inClaimOrder } from "./row.ts";
import { upsert } from "./controls.ts";
import { labelled } from "./labels.ts";
import { writeGuards } from "./guard-writes.ts";
import { STAGEABLE_LITERAL, dueUnkeyed, stageFairDue } from "./fair-stage.ts";

/*
 * Concurrency keys: a key's slots are its ready and running jobs, counted
 * under the key's row lock (SQLite: the single writer). Every write that can
 * free a slot takes the key's lock before the job's row and promotes waiting
 * jobs in the same transaction; due scheduled jobs are admitted the same way.
 * The decisions are the core's (`admit`, `freeSlots`, `discardReason`).
 */

/**
 * Locks a concurrency key's row for the rest of the transaction, creating
 * it (or setting its limit) when `limit` is given. Every transaction that
 * changes which jobs of a key hold slots takes this lock BEFORE touching
 * the key's job rows; claim, which does not change holders, never takes it.
 */
export async function lockKey(ctx: StoreContext, db: AnyDb, name: string, limit?: number): Promise<void> {
  if (limit !== undefined) return upsert(ctx, db, ctx.tables.keys, { name, max_holders: limit }, { max_holders: limit });
  let q = db.selectFrom(ctx.tables.keys).select("name").where("name", "=", name);
  if (ctx.engine.capabilities.rowLocks) q = q.forUpdate();
  await q.execute();
  await writeGuards(ctx, db, ctx.tables.keys, "name", [name]);
}

/** How many jobs of `key` hold a slot (SLOT_HOLDING_STATES). Call under the key's lock. */
export async function countHolders(ctx: StoreContext, db: AnyDb, key: string): Promise<number> {
  const r = await db
    .selectFrom(ctx.tables.jobs)
    .select((eb: ExpressionBuilder<any, any>) => eb.fn.countAll().as("n"))
    .where("concurrency_key", "=", key)
    .where("state", "in", SLOT_HOLDING_STATES)
    .executeTakeFirst();
  return Number(r?.n ?? 0);
}

/**
 * Makes key `name` exact, under its lock: the waiting jobs (blocked, or
 * scheduled and due; in claim order) are admitted while the key has free
 * slots; a due scheduled job beyond that is blocked or, when its stored
 * policy is "discard", cancelled with the reason (the core's `admit`
 * decides). Idempotent. Called in the same transaction as every write that
 * frees a slot, so no blocked job waits while its key has room. Announces
 * the queues that gained ready jobs, and returns them, with how many
 * blocked jobs it unblocked (due scheduled jobs it admitted not counted).
 */
export async function rebalance(ctx: StoreContext, db: AnyDb, name: string, now: number): Promise<{ queues: string[]; unblocked: number }> {
  const key = (await labelled(db.selectFrom(ctx.tables.keys).select("max_holders").where("name", "=", name), "rebalance").executeTakeFirst()) as
    | { max_holders: number }
    | undefined;
  if (!key) return { queues: [], unblocked: 0 };
  const limit = Number(key.max_holders);
  let holders = await countHolders(ctx, db, name);
  const waiting = (await inClaimOrder(
    db
      .selectFrom(ctx.tables.jobs)
      .select(["id", "state", "on_conflict", "queue"])
      .where("concurrency_key", "=", name)
      .where((eb: ExpressionBuilder<any, any>) =>
        eb.or([eb("state", "in", TRANSITIONS.unblock.from), eb.and([eb("state", "in", TRANSITIONS.stage.from), eb("run_at", "<=", now)])]),
      ),
  )
    .limit(freeSlots(limit, holders) + 100)
    .execute()) as { id: number | string; state: JobState; on_conflict: string | null; queue: string }[];
  const admitted = new Set<string>();
  let unblocked = 0;
  for (const w of waiting) {
    const id = Number(w.id);
    if (w.state === "blocked") {
      if (holders < limit && (await applyTransition(ctx, db, "unblock", { id, now }, {}))) {
        holders++;
        unblocked++;
        admitted.add(w.queue);
      }
      continue;
    }
    const decision = admit(holders, limit, w.on_conflict === "discard" ? "discard" : "block");
    if (decision === "ready") {
      if (await applyTransition(ctx, db, "stage", { id, now }, {})) {
        holders++;
        admitted.add(w.queue);
      }
    } else if (decision === "blocked") {
      await applyTransition(ctx, db, "stageBlocked", { id, now }, {});
    } else {
      const discarded = await applyTransition(ctx, db, "stageDiscard", { id, now }, { finished_at: now, last_error: discardReason(name, limit) });
      if (discarded) await settleChildren(ctx, db, [discarded], now);
    }
  }
  await ctx.engine.announceReady(db, [...admitted].map((queue) => ({ queue, due: false })));
  return { queues: [...admitted], unblocked };
}

/**
 * Admits due scheduled jobs: unkeyed ones straight to ready (one
 * transaction, rows other stagers hold are skipped; those of fair queues
 * at new places, see fair-stage.ts), keyed ones per key
 * under the key's lock through `rebalance`. Reads first, so an idle poll
 * writes nothing. The queues that gained ready jobs are announced (a claim
 * elsewhere may have passed over the rows while they were being staged).
 */
export async function stageDue(ctx: StoreContext, now: number): Promise<void> {
  const { db, tables, engine } = ctx;
  const due = () => db.selectFrom(tables.jobs).where(STAGEABLE_LITERAL).where("run_at", "<=", now);
  const unkeyed = await dueUnkeyed(db.selectFrom(tables.jobs).select("id"), now, false).limit(1).execute();
  if (unkeyed.length > 0) {
    await engine.writeTransaction(db, async (trx) => {
      let q = dueUnkeyed(guard(trx.selectFrom(tables.jobs).select(["id", "queue"]), "stage", { now }), now, false)
        .orderBy("run_at")
        .orderBy("id")
        .limit(1000);
      if (engine.capabilities.skipLocked) q = q.forUpdate().skipLocked();
      const rows = (await q.execute()) as { id: unknown; queue: string }[];
      if (rows.length === 0) return;
      const ids = rows.map((r) => Number(r.id));
      await labelled(guard(trx.updateTable(tables.jobs).set({ state: TRANSITIONS.stage.to, updated_at: now }).where("id", "in", ids), "stage", { now, byId: true }), "stage").execute();
      // Another process's claim may have passed over these rows while this transaction held them (SKIP LOCKED),
      // found nothing and gone idle: it is told, as for any job made ready.
      await engine.announceReady(trx, [...new Set(rows.map((r) => r.queue))].map((queue) => ({ queue, due: false })));
    });
  }
  await stageFairDue(ctx, now);
  const keys = await due().select("concurrency_key").distinct().where("concurrency_key", "is not", null).limit(100).execute();
  for (const { concurrency_key } of keys as { concurrency_key: string }[]) {
    await engine.writeTransaction(db, async (trx) => {
      await lockKey(ctx, trx, concurrency_key);
      await rebalance(ctx, trx, concurrency_key, now);
    });
  }
}
