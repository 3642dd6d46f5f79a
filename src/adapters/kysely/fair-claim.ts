/**
 * A claim's part in a fair queue (see core/fairness.ts for the rule,
 * fairness.ts beside this file for the rows): the keys it may serve, read
 * unlocked in serving order, enough of them that round 1 alone could fill
 * the claim (or all there are); each key's first ready jobs in claim order,
 * read unlocked in one statement (a UNION ALL of one LIMITed subquery per
 * key, each on the fair index); the core's round-robin sequence of them,
 * whose first jobs are then taken by id `FOR UPDATE SKIP LOCKED` (with the
 * claim guard checked again), as many as the claim needs. A job another
 * claim holds is passed over, and when it is its key's first job that
 * claim is serving the key's turn: this one serves the key after every
 * other (R21). At the end, the served keys' turn states are written in one
 * statement and the keys found without ready jobs are deactivated when they
 * have no live job. Claims of one queue never wait for each other. Round
 * trips per claim: a bounded few, not one per job or per key (one more per
 * lock of jobs others held, one more pair per further batch of keys when
 * the first batch has too few with ready jobs).
 */
import type { ExpressionBuilder, SelectQueryBuilder } from "kysely";
import { byClaimOrder, type ClaimCandidate } from "../../core/claim-order.ts";
import { IMPLICIT_FAIR_KEY, advanceTurns, fairSequence, type FairTurn } from "../../core/fairness.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { deactivateIdle, readFairKeys, writeTurns } from "./fairness.ts";
import { labelled } from "./labels.ts";

/** Keys per candidate statement: a UNION ALL of at most this many subqueries. */
const KEYS_PER_STATEMENT = 50;

/** The column a candidate read adds: its key's served position, as that read sees it. */
const SERVED = "docket_served";

/** How many times a claim that found the jobs it read held by others reads again. */
const MAX_REFILLS = 3;

/** The serving position a claim gives a key whose first ready job another claim holds: after every other key. */
const BEING_SERVED = Number.MAX_SAFE_INTEGER;

/** What one claim has read and taken of one fair queue. */
export class FairClaim {
  /** The keys it may serve, in the order read (serving order, batch after batch). */
  readonly turns: FairTurn[] = [];
  /** Whether more active keys may exist beyond those read. */
  more = true;
  /** The largest served position of the queue when the claim began. */
  base = 0;
  /** Every candidate of the queue it read, by id. */
  readonly byId = new Map<number, ClaimCandidate>();
  /** Per key, the ids of its latest read and whether that read was short (fewer than asked: all its ready jobs). */
  readonly lastRead = new Map<string, { ids: number[]; short: boolean }>();
  /** Keys whose first ready job another claim holds: served last by this claim. */
  readonly beingServed = new Set<string>();
  /** Jobs it read that another claim holds (or has taken since): passed over. */
  readonly held = new Set<number>();
  /** Keys found with no ready job by an unfiltered read: cleared when they have no live job either. */
  readonly idle = new Set<string>();
  passes = 0;

  /** Reads up to `limit` more keys in serving order; returns them. */
  async readMore(ctx: StoreContext, db: AnyDb, queue: string, limit: number): Promise<string[]> {
    const first = this.turns.length === 0;
    const got = await readFairKeys(ctx, db, queue, limit, this.turns.map((t) => t.key));
    if (first) this.base = got.base;
    this.turns.push(...got.turns);
    this.more = got.turns.length === limit;
    return got.turns.map((t) => t.key);
  }

  /** The turn states the round-robin orders by: those read, with the keys another claim is serving moved last. */
  order(): FairTurn[] {
    return this.turns.map((t) => (this.beingServed.has(t.key) ? { ...t, served: BEING_SERVED } : t));
  }

  /**
   * After the claim's UPDATE, as its last statements: writes the served
   * keys' turn states and deactivates the idle keys.
   */
  async finish(ctx: StoreContext, db: AnyDb, queue: string, chosen: readonly number[]): Promise<void> {
    const taken = new Set(chosen);
    const keys = chosen.map((id) => this.byId.get(id)).filter((c): c is ClaimCandidate => c !== undefined).map(keyOf);
    const out = new Set([...this.lastRead].filter(([key, r]) => r.short && !this.beingServed.has(key) && r.ids.every((id) => taken.has(id))).map(([key]) => key));
    await deactivateIdle(ctx, db, queue, [...this.idle]);
    await writeTurns(ctx, db, queue, [...advanceTurns(this.turns, keys, out, this.base).values()]);
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
  }
  const unfiltered = f.passes++ === 0 && !filtered;
  const picked = new Set(chosen);
  const lists = new Map<string, ClaimCandidate[]>();
  for (const id of chosen) {
    const c = f.byId.get(id);
    if (c) lists.set(keyOf(c), [...(lists.get(keyOf(c)) ?? []), c]);
  }
  const inLists = new Set(chosen);
  /** Reads the first `need` ready jobs of each of `keys` that this claim has not yet read in this pass nor found held. */
  const readJobs = async (keys: readonly string[]) => {
    const skip = [...inLists, ...f!.held];
    for (let i = 0; i < keys.length; i += KEYS_PER_STATEMENT) {
      const batch = keys.slice(i, i + KEYS_PER_STATEMENT);
      const parts = batch.map((key, k) => {
        let q = query([queue]);
        q = key === IMPLICIT_FAIR_KEY ? q.where("fair_key", "is", null) : q.where("fair_key", "=", key);
        if (skip.length > 0) q = q.where("id", "not in", skip);
        // The key's served position as this statement sees it: moved since the keys were read, another claim served the key.
        q = q.select((eb: ExpressionBuilder<any, any>) =>
          eb.selectFrom(`${ctx.tables.fairKeys} as fs`).select("fs.served").where("fs.queue", "=", queue).where("fs.name", "=", key).as(SERVED),
        );
        // Unlocked: the jobs the claim takes are locked by id below, and only they (a claim holds no job it does not take).
        return db.selectFrom(q.limit(need).as(`fk${k}`)).selectAll();
      });
      // deno-lint-ignore no-explicit-any
      let union: any = parts[0]!;
      for (const p of parts.slice(1)) union = union.unionAll(p);
      const read = new Map<string, number[]>(batch.map((key) => [key, []]));
      const servedAt = new Map(f!.turns.map((t) => [t.key, t.served]));
      for (const row of (await labelled(union, "claim-candidates").execute()) as Record<string, unknown>[]) {
        const { [SERVED]: served, ...r } = row;
        const c = seen(r);
        if (servedAt.has(keyOf(c)) && Number(served) !== servedAt.get(keyOf(c))) f!.beingServed.add(keyOf(c));
        f!.byId.set(c.id, c);
        read.get(keyOf(c))?.push(c.id);
        inLists.add(c.id);
        lists.set(keyOf(c), [...(lists.get(keyOf(c)) ?? []), c]);
      }
      for (const [key, ids] of read) {
        const before = f!.lastRead.get(key);
        f!.lastRead.set(key, { ids: before && skip.length > 0 ? [...before.ids, ...ids] : ids, short: ids.length < need });
        if (unfiltered && ids.length === 0 && !before) f!.idle.add(key);
      }
    }
  };
  /** How many keys read have a job to offer, not counting keys another claim is serving. */
  const ready = () => [...lists].filter(([key, l]) => !f!.beingServed.has(key) && l.some((c) => !picked.has(c.id) && !f!.held.has(c.id))).length;
  /** Reads further keys until `need` of those read have ready jobs (round 1 gives each at least one) or none is left. */
  const readKeys = async (): Promise<boolean> => {
    let any = false;
    while (f!.more && ready() < need) {
      const keys = await f!.readMore(ctx, db, queue, Math.max(claimLimit, 1));
      if (keys.length === 0) break;
      await readJobs(keys);
      any = true;
    }
    return any;
  };
  if (f.turns.length > 0) await readJobs(f.turns.map((t) => t.key));
  await readKeys();
  for (const list of lists.values()) list.sort(byClaimOrder);
  if (!ctx.engine.capabilities.skipLocked) return fairSequence(f.order(), lists).filter((c) => !picked.has(c.id));
  // Take the sequence's first `need` jobs; a job another claim holds is passed over (and its key served last when
  // it was the key's first), and the sequence, made again without it, gives the next. When the jobs read run out,
  // keys whose read was full are read again past the held jobs, then further keys, a bounded number of times.
  const out = new Set<number>();
  for (let refills = 0; ; ) {
    const sequence = fairSequence(f.order(), lists).filter((c) => !picked.has(c.id) && !f.held.has(c.id));
    const taken = sequence.filter((c) => out.has(c.id));
    const want = sequence.filter((c) => !out.has(c.id)).slice(0, need - taken.length);
    if (want.length === 0) {
      if (taken.length >= need || refills++ >= MAX_REFILLS) return taken;
      // Further keys first (the keys read are served by other claims), then the full keys again.
      if (!(await readKeys())) {
        const full = [...f.lastRead].filter(([, r]) => !r.short).map(([key]) => key);
        if (full.length === 0) return taken;
        await readJobs(full);
      }
      for (const list of lists.values()) list.sort(byClaimOrder);
      continue;
    }
    // A key another claim is serving goes after every other key, also those not read yet.
    if (want.some((c) => f.beingServed.has(keyOf(c))) && f.more && refills++ < MAX_REFILLS && (await readKeys())) {
      for (const list of lists.values()) list.sort(byClaimOrder);
      continue;
    }
    const got = new Set((await lockJobs(db, query, queue, want, seen)).map((c) => c.id));
    for (const c of want) {
      if (got.has(c.id)) {
        out.add(c.id);
        continue;
      }
      const key = keyOf(c);
      const first = lists.get(key)!.find((x) => !f.held.has(x.id) && !picked.has(x.id));
      if (first?.id === c.id) f.beingServed.add(key);
      f.held.add(c.id);
    }
  }
}

/**
 * `want` taken `FOR UPDATE SKIP LOCKED` by id, with the pass's filters
 * (the claim guard among them) checked again on the newest version of each
 * row; the candidates taken, made again of the rows read under the lock.
 */
async function lockJobs(
  db: AnyDb,
  // deno-lint-ignore no-explicit-any
  query: (queues: string[]) => SelectQueryBuilder<any, any, any>,
  queue: string,
  want: readonly ClaimCandidate[],
  // deno-lint-ignore no-explicit-any
  seen: (row: Record<string, any>) => ClaimCandidate,
): Promise<ClaimCandidate[]> {
  const q = query([queue])
    .where("id", "in", want.map((c) => c.id))
    .forUpdate()
    .skipLocked();
  return ((await labelled(q, "fair-jobs").execute()) as Record<string, unknown>[]).map(seen);
}
