import type { RepairKeysParams } from "../../core/adapter.ts";
import { TRANSITIONS } from "../../core/transitions.ts";
import type { StoreContext } from "./context.ts";
import { countHolders, lockKey, rebalance } from "./admission.ts";

/**
 * See DocketAdapter.repairKeys: reads the keys that have blocked jobs (no
 * lock), and for each whose holders look below its limit rebalances it under
 * the key's lock in its own transaction, counting holders before and after.
 * A key whose count rose is reported. Many callers at once are safe: the key
 * lock serializes them, and a second rebalance finds nothing to do.
 */
export async function repairKeys(ctx: StoreContext, params: RepairKeysParams): Promise<string[]> {
  if (params.limit <= 0) return [];
  const { db, tables, engine } = ctx;
  const candidates = (await db
    .selectFrom(tables.jobs)
    .select("concurrency_key")
    .distinct()
    .where("state", "in", TRANSITIONS.unblock.from)
    .where("concurrency_key", "is not", null)
    .orderBy("concurrency_key")
    .limit(params.limit)
    .execute()) as { concurrency_key: string }[];
  const repaired: string[] = [];
  for (const { concurrency_key: name } of candidates) {
    const key = (await db.selectFrom(tables.keys).select("max_holders").where("name", "=", name).executeTakeFirst()) as { max_holders: number } | undefined;
    if (!key || (await countHolders(ctx, db, name)) >= Number(key.max_holders)) continue;
    const promoted = await engine.writeTransaction(db, async (trx) => {
      await lockKey(ctx, trx, name);
      const before = await countHolders(ctx, trx, name);
      await rebalance(ctx, trx, name, params.now);
      return (await countHolders(ctx, trx, name)) > before;
    });
    if (promoted) repaired.push(name);
  }
  return repaired;
}
