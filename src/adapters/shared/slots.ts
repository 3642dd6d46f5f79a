import type { ExpressionBuilder } from "kysely";
import type { JobRecord } from "../../core/job.ts";
import { TRANSITIONS, freesSlot, type TransitionEvent } from "../../core/transitions.ts";
import { SLOT_HOLDING_STATES, type JobState } from "../../core/states.ts";
import { admit, discardReason, freeSlots } from "../../core/concurrency.ts";
import { AdapterBase, type AnyDb, type GuardKey } from "./base.ts";
import { inClaimOrder } from "./row.ts";

/**
 * The concurrency-key layer: a key's slots are its ready and running jobs,
 * counted under the key's row lock (SQLite: the single writer). Every write
 * that can free a slot takes the key's lock before the job's row and
 * promotes waiting jobs in the same transaction (`transition`, `rebalance`);
 * due scheduled jobs are admitted through the same path (`stageDue`).
 */
export abstract class SlotAdapter extends AdapterBase {
  /**
   * A guarded write as its own unit of work. When `event` can free a
   * concurrency slot, the job's key is locked first and rebalanced in the
   * same transaction (the next blocked job is promoted before commit).
   */
  protected transition(
    event: TransitionEvent,
    key: GuardKey & { id: number; concurrencyKey?: string | null },
    set: Record<string, unknown>,
  ): Promise<JobRecord | null> {
    if (!freesSlot(event)) return this.guardErrors(() => this.writeStatement((db) => this.applyTransition(db, event, key, set)));
    if (key.concurrencyKey === null) {
      // The caller says the job has no key: no key to lock or rebalance, so one guarded statement,
      // which itself checks that the job has no key; a miss (lost race, or a key after all) takes the full path.
      return this.guardErrors(async () => {
        const moved = await this.writeStatement((db) => this.applyTransition(db, event, key, set, { unkeyedOnly: true }));
        return moved ?? this.transition(event, { ...key, concurrencyKey: undefined }, set);
      });
    }
    return this.guardErrors(() =>
      this.writeTransaction(async (db) => {
        // A job's key never changes, so reading it before taking the key's lock is safe.
        const row = (await db.selectFrom(this.tables.jobs).select("concurrency_key").where("id", "=", key.id).executeTakeFirst()) as
          | { concurrency_key: string | null }
          | undefined;
        const ck = row?.concurrency_key ?? null;
        if (ck !== null) await this.lockKey(db, ck);
        const moved = await this.applyTransition(db, event, key, set);
        if (moved && ck !== null) await this.rebalance(db, ck, key.now);
        return moved;
      }),
    );
  }

  /**
   * Admits due scheduled jobs: unkeyed ones straight to ready (one
   * transaction, rows other stagers hold are skipped), keyed ones per key
   * under the key's lock through `rebalance`. Reads first, so an idle poll
   * writes nothing.
   */
  protected async stageDue(now: number): Promise<void> {
    const due = () =>
      this.db
        .selectFrom(this.tables.jobs)
        .where("state", "in", TRANSITIONS.stage.from)
        .where("run_at", "<=", now);
    const unkeyed = await due().select("id").where("concurrency_key", "is", null).limit(1).execute();
    if (unkeyed.length > 0) {
      await this.writeTransaction(async (db) => {
        let q = this.guard(db.selectFrom(this.tables.jobs).select("id"), "stage", { now })
          .where("concurrency_key", "is", null)
          .orderBy("run_at")
          .orderBy("id")
          .limit(1000);
        if (this.supportsSkipLocked) q = q.forUpdate().skipLocked();
        const ids = (await q.execute()).map((r) => Number(r.id));
        if (ids.length === 0) return;
        await this.guard(db.updateTable(this.tables.jobs).set({ state: TRANSITIONS.stage.to, updated_at: now }).where("id", "in", ids), "stage", {
          now,
        }).execute();
      });
    }
    const keys = await due().select("concurrency_key").distinct().where("concurrency_key", "is not", null).limit(100).execute();
    for (const { concurrency_key } of keys as { concurrency_key: string }[]) {
      await this.writeTransaction(async (db) => {
        await this.lockKey(db, concurrency_key);
        await this.rebalance(db, concurrency_key, now);
      });
    }
  }

  /**
   * Locks a concurrency key's row for the rest of the transaction, creating
   * it (or setting its limit) when `limit` is given. Every transaction that
   * changes which jobs of a key hold slots takes this lock BEFORE touching
   * the key's job rows; claim, which does not change holders, never takes it.
   */
  protected async lockKey(db: AnyDb, name: string, limit?: number): Promise<void> {
    if (limit !== undefined) {
      const insert = db.insertInto(this.tables.keys).values({ name, max_holders: limit });
      await (this.supportsOnConflict
        ? insert.onConflict((oc) => oc.column("name").doUpdateSet({ max_holders: limit }))
        : insert.onDuplicateKeyUpdate({ max_holders: limit })
      ).execute();
      return;
    }
    let q = db.selectFrom(this.tables.keys).select("name").where("name", "=", name);
    if (this.supportsRowLocks) q = q.forUpdate();
    await q.execute();
  }

  protected async countHolders(db: AnyDb, key: string): Promise<number> {
    const r = await db
      .selectFrom(this.tables.jobs)
      .select((eb: ExpressionBuilder<any, any>) => eb.fn.countAll().as("n"))
      .where("concurrency_key", "=", key)
      .where("state", "in", SLOT_HOLDING_STATES)
      .executeTakeFirst();
    return Number(r?.n ?? 0);
  }

  /**
   * Makes key `name` exact, under its lock: the waiting jobs (blocked, or
   * scheduled and due; by priority, run_at, id) are admitted while the key
   * has free slots (limit − holders); a due scheduled job beyond that is
   * blocked or, when its stored policy is "discard", cancelled with the
   * reason (the core's `admit` decides). Idempotent. Called in the same
   * transaction as every write that frees a slot, so no blocked job waits
   * while its key has room.
   */
  protected async rebalance(db: AnyDb, name: string, now: number): Promise<void> {
    const key = (await db.selectFrom(this.tables.keys).select("max_holders").where("name", "=", name).executeTakeFirst()) as
      | { max_holders: number }
      | undefined;
    if (!key) return;
    const limit = Number(key.max_holders);
    let holders = await this.countHolders(db, name);
    const waiting = (await inClaimOrder(
      db
        .selectFrom(this.tables.jobs)
        .select(["id", "state", "on_conflict", "queue"])
        .where("concurrency_key", "=", name)
        .where((eb: ExpressionBuilder<any, any>) =>
          eb.or([eb("state", "in", TRANSITIONS.unblock.from), eb.and([eb("state", "in", TRANSITIONS.stage.from), eb("run_at", "<=", now)])]),
        ),
    )
      .limit(freeSlots(limit, holders) + 100)
      .execute()) as { id: number | string; state: JobState; on_conflict: string | null; queue: string }[];
    const admitted = new Set<string>();
    for (const w of waiting) {
      const id = Number(w.id);
      if (w.state === "blocked") {
        if (holders < limit && (await this.applyTransition(db, "unblock", { id, now }, {}))) {
          holders++;
          admitted.add(w.queue);
        }
        continue;
      }
      const decision = admit(holders, limit, w.on_conflict === "discard" ? "discard" : "block");
      if (decision === "ready") {
        if (await this.applyTransition(db, "stage", { id, now }, {})) {
          holders++;
          admitted.add(w.queue);
        }
      } else if (decision === "blocked") {
        await this.applyTransition(db, "stageBlocked", { id, now }, {});
      } else {
        await this.applyTransition(db, "stageDiscard", { id, now }, { finished_at: now, last_error: discardReason(name, limit) });
      }
    }
    await this.announceReady(db, [...admitted].map((queue) => ({ queue, due: false })));
  }
}
