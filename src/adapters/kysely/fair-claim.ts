/**
 * A claim's read of a fair queue in the transaction that applies controls
 * (see core/fairness.ts for the rule, fairness.ts beside this file for the
 * rows): its first ready jobs in tag order, then, when those are fewer than
 * asked, its untagged ready jobs in claim order, each read locked `FOR
 * UPDATE SKIP LOCKED` where the engine can, as a plain queue's candidates
 * are. No key row is read or locked: concurrent claimers take the queue's
 * first jobs they can lock, whichever keys they are of (R21). In a
 * prioritized queue each key's best jobs take the places of its first ones
 * (core `withinKeys`): one more read (a UNION ALL of one LIMITed subquery
 * per key, locked alike) and, after the claim chose, one UPDATE of the tags
 * of the jobs it read and left.
 */
import { sql, type SelectQueryBuilder } from "kysely";
import { IMPLICIT_FAIR_KEY, byFairOrder, withinKeys, type FairCandidate } from "../../core/fairness.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { labelled } from "./labels.ts";
import { oneStateLiteral } from "./guard.ts";

/** Keys per statement of a prioritized queue's read of its keys' best jobs. */
const KEYS_PER_STATEMENT = 50;

// deno-lint-ignore no-explicit-any
type Query = SelectQueryBuilder<any, any, any>;

/** One pass's candidates of a fair queue, in fair order, and the tags to write once the pass chose (prioritized queues). */
export interface FairPick {
  candidates: FairCandidate[];
  retag: ((chosen: ReadonlySet<number>) => Map<number, number>) | null;
}

/**
 * Up to `need` candidates of fair queue `queue`. `query` gives the pass's
 * filtered candidate read of the queue (claim order); `seen` makes a
 * candidate of a row (with its `fair_tag`).
 */
export async function fairPick(
  ctx: StoreContext,
  db: AnyDb,
  queue: string,
  need: number,
  prioritized: boolean,
  query: (queues: string[]) => Query,
  // deno-lint-ignore no-explicit-any
  seen: (row: Record<string, any>) => FairCandidate,
): Promise<FairPick> {
  const lock = (q: Query): Query => (ctx.engine.capabilities.skipLocked ? q.forUpdate().skipLocked() : q);
  // The queue's tagged jobs, `state` named with `=` so that every engine reads them through its tag or per-key index (see oneStateLiteral).
  const taggedOf = (): Query => query([queue]).where(oneStateLiteral("claim")).where("fair_tag", "is not", null);
  const tagged = taggedOf().clearOrderBy().orderBy("fair_tag").orderBy("id").limit(need);
  const window = ((await labelled(lock(tagged), "claim-candidates").execute()) as Record<string, unknown>[]).map(seen);
  if (window.length < need) {
    const untagged = query([queue]).where("fair_tag", "is", null).limit(need - window.length);
    window.push(...((await labelled(lock(untagged), "claim-candidates").execute()) as Record<string, unknown>[]).map(seen));
  }
  if (!prioritized || window.length === 0) return { candidates: window.sort(byFairOrder), retag: null };
  const counts = new Map<string, number>();
  for (const c of window) if (c.fairTag !== null) counts.set(c.fairKey ?? IMPLICIT_FAIR_KEY, (counts.get(c.fairKey ?? IMPLICIT_FAIR_KEY) ?? 0) + 1);
  const best = new Map<string, FairCandidate[]>();
  const keys = [...counts.keys()];
  for (let i = 0; i < keys.length; i += KEYS_PER_STATEMENT) {
    const parts = keys.slice(i, i + KEYS_PER_STATEMENT).map((key, k) => {
      const q = taggedOf();
      const ofKey = key === IMPLICIT_FAIR_KEY ? q.where("fair_key", "is", null) : q.where("fair_key", "=", key);
      return db.selectFrom(lock(ofKey.limit(counts.get(key)!)).as(`fk${k}`)).selectAll();
    });
    // deno-lint-ignore no-explicit-any
    let union: any = parts[0]!;
    for (const p of parts.slice(1)) union = union.unionAll(p);
    for (const row of await labelled(union, "fair-best").execute()) {
      const c = seen(row as Record<string, unknown>);
      const key = c.fairKey ?? IMPLICIT_FAIR_KEY;
      best.set(key, [...(best.get(key) ?? []), c]);
    }
  }
  return withinKeys(window, best);
}

/** Writes the tags `retag` gives (jobs this transaction holds) in one UPDATE. */
export async function writeTags(ctx: StoreContext, db: AnyDb, retag: ReadonlyMap<number, number>): Promise<void> {
  if (retag.size === 0) return;
  const ids = [...retag.keys()];
  // The tags are integers the core computed, written as literals: a parameter there is text to PostgreSQL.
  const tag = sql`case ${sql.join(ids.map((id) => sql`when ${sql.ref("id")} = ${sql.lit(id)} then ${sql.lit(retag.get(id)!)}`), sql` `)} end`;
  await labelled(db.updateTable(ctx.tables.jobs).set({ fair_tag: tag }).where("id", "in", ids), "fair-retag").execute();
}
