/**
 * A claim's part in a fair queue (see core/fairness.ts for the rule,
 * fairness.ts beside this file for the rows): the keys it serves, locked
 * `FOR UPDATE SKIP LOCKED` in serving order, enough of them that round 1
 * alone could fill the claim (or all there are); each key's first ready
 * jobs in claim order, read in one statement (a UNION ALL of one LIMITed
 * subquery per key, each on the fair index), unlocked: no other claim
 * takes a job of a key this one holds; the core's round-robin
 * sequence of them; and at the end the served keys' turn states, written in
 * one statement, and the keys found without ready jobs deactivated when
 * they have no live job. Round trips per claim: a bounded few, not one per
 * job or per key (one more pair per further batch of keys when the first
 * batch has too few with ready jobs).
 */
import { sql, type ExpressionBuilder, type SelectQueryBuilder } from "kysely";
import { byClaimOrder, type ClaimCandidate } from "../../core/claim-order.ts";
import { IMPLICIT_FAIR_KEY, advanceTurns, fairSequence, type FairTurn } from "../../core/fairness.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { deactivateIdle, lockFairKeys, maxServed, writeTurns } from "./fairness.ts";
import { labelled } from "./labels.ts";

/** Keys per candidate statement: a UNION ALL of at most this many subqueries. */
const KEYS_PER_STATEMENT = 50;

/** How many windows of held keys' jobs claimers with room spread over. */
const OVERFLOW_SPREAD = 4;

/** What one claim holds and has seen of one fair queue. */
export class FairClaim {
  /** The keys it holds, in the order locked (serving order, batch after batch). */
  readonly turns: FairTurn[] = [];
  /** Whether more active keys may exist beyond those it holds. */
  more = true;
  /** The largest served position of the queue when the claim began. */
  base = 0;
  /** Every candidate of the queue it read, by id. */
  readonly byId = new Map<number, ClaimCandidate>();
  /** Per key, the ids of its latest read and whether that read was short (fewer than asked: all its ready jobs). */
  readonly lastRead = new Map<string, { ids: number[]; short: boolean }>();
  /** Keys found with no ready job by an unfiltered read: cleared when they have no live job either. */
  readonly idle = new Set<string>();
  passes = 0;

  /** Locks up to `limit` more keys in serving order; returns them. */
  async lockMore(ctx: StoreContext, db: AnyDb, queue: string, limit: number): Promise<string[]> {
    const got = await lockFairKeys(ctx, db, queue, limit, this.turns.map((t) => t.key));
    this.turns.push(...got);
    this.more = got.length === limit;
    return got.map((t) => t.key);
  }

  /** After the claim's passes: writes the served keys' turn states and deactivates the idle keys. */
  async finish(ctx: StoreContext, db: AnyDb, queue: string, chosen: readonly number[]): Promise<void> {
    const taken = new Set(chosen);
    // Jobs taken by `overflow` are not in `byId`: they count in no key's turn.
    const keys = chosen.map((id) => this.byId.get(id)).filter((c): c is ClaimCandidate => c !== undefined).map(keyOf);
    const out = new Set([...this.lastRead].filter(([, r]) => r.short && r.ids.every((id) => taken.has(id))).map(([key]) => key));
    await writeTurns(ctx, db, queue, [...advanceTurns(this.turns, keys, out, this.base).values()]);
    await deactivateIdle(ctx, db, queue, [...this.idle]);
  }
}

const keyOf = (c: ClaimCandidate): string => c.fairKey ?? IMPLICIT_FAIR_KEY;

/**
 * One pass's candidates of fair queue `queue`, in round-robin order (the
 * jobs chosen by earlier passes count in their keys' turns and are left
 * out). `query` gives the pass's filtered candidate read of the queue in
 * claim order; `seen` makes a candidate of a row.
 */
export async function fairPick(
  ctx: StoreContext,
  db: AnyDb,
  claims: Map<string, FairClaim>,
  queue: string,
  need: number,
  claimLimit: number,
  chosen: readonly number[],
  filtered: boolean,
  // deno-lint-ignore no-explicit-any
  query: (queues: string[]) => SelectQueryBuilder<any, any, any>,
  // deno-lint-ignore no-explicit-any
  seen: (row: Record<string, any>) => ClaimCandidate,
): Promise<ClaimCandidate[]> {
  let f = claims.get(queue);
  if (!f) {
    f = new FairClaim();
    claims.set(queue, f);
    f.base = await maxServed(ctx, db, queue);
  }
  const unfiltered = f.passes++ === 0 && !filtered;
  const picked = new Set(chosen);
  const lists = new Map<string, ClaimCandidate[]>();
  for (const id of chosen) {
    const c = f.byId.get(id);
    if (c) lists.set(keyOf(c), [...(lists.get(keyOf(c)) ?? []), c]);
  }
  let keys = f.turns.length === 0 ? await f.lockMore(ctx, db, queue, Math.max(claimLimit, 1)) : f.turns.map((t) => t.key);
  for (;;) {
    for (let i = 0; i < keys.length; i += KEYS_PER_STATEMENT) {
      const batch = keys.slice(i, i + KEYS_PER_STATEMENT);
      const parts = batch.map((key, k) => {
        const q = query([queue]);
        const ofKey = key === IMPLICIT_FAIR_KEY ? q.where("fair_key", "is", null) : q.where("fair_key", "=", key);
        // The key's row lock keeps every other claim serving keys off these jobs (a cancel racing the claim is caught
        // by the claim UPDATE's guard). Where a locked read locks only what it returns (PostgreSQL) they are also
        // taken SKIP LOCKED, so that a claim taking jobs of held keys (`overflow`) never makes this claim wait or
        // take what it took. Not on MariaDB: a read of one key's jobs through another index locks (briefly) the
        // other keys' rows it scans, and a claim holding one of those keys would then skip its own jobs.
        const jobs = ofKey.limit(need);
        return db.selectFrom((ctx.engine.capabilities.exactSkipLocked ? jobs.forUpdate().skipLocked() : jobs).as(`fk${k}`)).selectAll();
      });
      // deno-lint-ignore no-explicit-any
      let union: any = parts[0]!;
      for (const p of parts.slice(1)) union = union.unionAll(p);
      const read = new Map<string, number[]>(batch.map((key) => [key, []]));
      for (const row of await labelled(union, "claim-candidates").execute()) {
        const c = seen(row as Record<string, unknown>);
        f.byId.set(c.id, c);
        read.get(keyOf(c))?.push(c.id);
        lists.set(keyOf(c), [...(lists.get(keyOf(c)) ?? []), c]);
      }
      for (const [key, ids] of read) {
        f.lastRead.set(key, { ids, short: ids.length < need });
        if (unfiltered && ids.length === 0) f.idle.add(key);
      }
    }
    // Round 1 gives each key with ready jobs at least one: with `need` such keys, keys further on cannot be reached.
    const withJobs = [...lists.values()].filter((l) => l.some((c) => !picked.has(c.id))).length;
    if (withJobs >= need || !f.more) break;
    keys = await f.lockMore(ctx, db, queue, Math.max(claimLimit, 1));
    if (keys.length === 0) break;
  }
  for (const list of lists.values()) list.sort(byClaimOrder);
  const sequence = fairSequence(f.turns, lists).filter((c) => !picked.has(c.id));
  if (sequence.length >= need || f.more || !ctx.engine.capabilities.exactSkipLocked) return sequence;
  return [...sequence, ...(await overflow(db, f, queue, need - sequence.length, Math.max(need, claimLimit), query, seen))];
}

/**
 * Work-conserving past the keys a claim holds (where a locked read locks
 * only what it returns, so the holders take their jobs SKIP LOCKED and
 * never wait for these): when it has read every key
 * it could take and still has room for `room` jobs, it takes jobs of the
 * keys other claims hold (a key one claim serves would otherwise drain at
 * that claim's pace alone): from a window of `room` of their ready jobs in
 * claim order, past the first `skip` (which the holders take) and a random
 * further multiple of `skip` (so that claimers with room do not all pick
 * one window), `FOR UPDATE SKIP LOCKED`. These jobs come after every job of
 * the keys it holds and count in no key's turn: a claim does not write the
 * turn state of a key another claim holds.
 */
async function overflow(
  db: AnyDb,
  f: FairClaim,
  queue: string,
  room: number,
  skip: number,
  // deno-lint-ignore no-explicit-any
  query: (queues: string[]) => SelectQueryBuilder<any, any, any>,
  // deno-lint-ignore no-explicit-any
  seen: (row: Record<string, any>) => ClaimCandidate,
): Promise<ClaimCandidate[]> {
  const held = f.turns.map((t) => t.key);
  let window = query([queue]).clearSelect().select("id");
  const named = held.filter((k) => k !== IMPLICIT_FAIR_KEY);
  // deno-lint-ignore no-explicit-any
  window = window.where((eb: ExpressionBuilder<any, any>) => {
    const others = named.length > 0 ? eb("fair_key", "not in", named) : eb("fair_key", "is not", null);
    return held.includes(IMPLICIT_FAIR_KEY) ? others : eb.or([others, eb("fair_key", "is", null)]);
  });
  window = window.offset(skip * (1 + Math.floor(Math.random() * OVERFLOW_SPREAD))).limit(room);
  // By primary key (`id = ANY(ARRAY(…))`: the window is computed once), the guard checked again under the lock.
  const q = query([queue])
    .clearOrderBy()
    .where(sql<boolean>`${sql.ref("id")} = any(array(${window}))`)
    .forUpdate()
    .skipLocked();
  // Not entered in `f.byId`: the claim's turn writes never count them.
  return ((await labelled(q, "fair-overflow").execute()) as Record<string, unknown>[]).map(seen).sort(byClaimOrder);
}
