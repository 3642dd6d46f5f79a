import type { RepairKeysParams } from "../../core/adapter.ts";
import { TRANSITIONS } from "../../core/transitions.ts";
import type { StoreContext } from "./context.ts";
import { countHolders, lockKey, rebalance } from "./admission.ts";
import { labelled } from "./labels.ts";

/**
 * See DocketAdapter.repairKeys: reads the keys that have blocked jobs (no
 * lock), and for each whose holders look below its limit rebalances it under
 * the key's lock in its own transaction. A key of which the rebalance
 * unblocked a blocked job is reported: under the lock, that job was blocked
 * while the key had room. A due scheduled job the rebalance admits on the
 * way is not a repair (staging admits it the same way; a child its last
 * parent released moments ago is one). Many callers at once are safe: the
 * key lock serializes them, and a second rebalance finds nothing to do.
 */
export async function repairKeys(ctx: StoreContext, params: RepairKeysParams): Promise<string[]> {
  if (params.limit <= 0) return [];
  const { db, tables, engine } = ctx;
  const read = db
    .selectFrom(tables.jobs)
    .select("concurrency_key")
    .distinct()
    .where("state", "in", TRANSITIONS.unblock.from)
    .where("concurrency_key", "is not", null)
    .orderBy("concurrency_key")
    .limit(params.limit);
  const candidates = (await labelled(read, "repair-keys").execute()) as { concurrency_key: string }[];
  const repaired: string[] = [];
  for (const { concurrency_key: name } of candidates) {
    const key = (await db.selectFrom(tables.keys).select("max_holders").where("name", "=", name).executeTakeFirst()) as { max_holders: number } | undefined;
    if (!key || (await countHolders(ctx, db, name)) >= Number(key.max_holders)) continue;
    const unblocked = await engine.writeTransaction(db, async (trx) => {
      await lockKey(ctx, trx, name);
      return (await rebalance(ctx, trx, name, params.now)).unblocked;
    });
    if (unblocked > 0) repaired.push(name);
  }
  return repaired;
}
