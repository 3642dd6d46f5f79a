/**
 * Fair sharing, as one rule: within a queue, claims serve fairness keys in
 * weighted round-robin. Each key has a turn state (its weight, the position
 * at which its last turn ended, and how many jobs it has taken of a turn
 * not yet ended); a claim orders the keys with ready jobs by that position
 * (then by name), gives each in turn up to its weight (the first turn: what
 * is left of it), and goes round again while it has room and any key has
 * ready jobs (work-conserving). Within a key, jobs go in claim order. The
 * jobs of a fair queue without a fairness key form one implicit key
 * (IMPLICIT_FAIR_KEY, weight 1). Adapters store the turn states, hand each
 * claim's keys and candidates to `fairSequence`, and write back what
 * `advanceTurns` returns; nothing here reads storage.
 *
 * The bound: a claim takes a turn of each key in position order, so a key
 * with a ready job is reached after at most ⌈active keys ÷ jobs per claim⌉
 * claims of its queue (with weights 1; a claim's turns end at least one
 * key each), however many jobs the other keys hold.
 */
import { byClaimOrder } from "./claim-order.ts";
import { InvalidArgumentError } from "./errors.ts";
import { shown } from "./shown.ts";
import { checkKeys, checkObject, validateInteger, validateName } from "./validate.ts";

/** An enqueue's `fairness: { key, weight? }`. */
export interface FairnessSpec {
  key: string;
  /** Jobs per round (default 1). The key's stored weight is the latest enqueue's. */
  weight: number;
}

/** Largest accepted weight. */
export const MAX_FAIR_WEIGHT = 1000;

/** The key of a fair queue's jobs that name none: one key of weight 1 (never a valid name, so never a user's key). */
export const IMPLICIT_FAIR_KEY = "";

/** An enqueue's `fairness` option, checked; InvalidArgumentError otherwise. */
export function validateFairness(value: unknown, at: string): FairnessSpec {
  const what = `${at}fairness`;
  if (value === undefined || value === null) throw new InvalidArgumentError(`${what} must be an object { key, weight? }, got ${shown(value)}`);
  checkObject(value, what, " { key, weight? }");
  checkKeys(value, ["key", "weight"], what);
  const v = value as Partial<FairnessSpec>;
  const key = validateName(v.key, `${what}.key`);
  const weight = v.weight === undefined ? 1 : validateInteger(v.weight, `${what}.weight`, 1, MAX_FAIR_WEIGHT);
  return { key, weight };
}

/** A key's turn state, as stored. */
export interface FairTurn {
  key: string;
  weight: number;
  /** Where its last turn ended (larger: served more recently). */
  served: number;
  /** Jobs taken of its current turn (0 <= used < weight). */
  used: number;
}

/** The order in which a claim serves keys: least recently served first, then by name. */
export function byTurn(a: FairTurn, b: FairTurn): number {
  return a.served - b.served || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

/**
 * The round-robin sequence of a fair queue's candidates: `lists` holds each
 * key's candidates in claim order; round 1 gives each key (in `byTurn`
 * order) what is left of its turn (`weight − used`), each later round up to
 * `weight`, until every list is used up. Keys without a turn state are
 * served first as new keys (served 0, weight 1). A claim walks this
 * sequence under the other controls.
 */
export function fairSequence<C>(turns: readonly FairTurn[], lists: ReadonlyMap<string, readonly C[]>): C[] {
  const known = new Map(turns.map((t) => [t.key, t]));
  const order = [...lists.keys()].map((key) => known.get(key) ?? { key, weight: 1, served: 0, used: 0 }).sort(byTurn);
  const at = new Map<string, number>();
  const out: C[] = [];
  for (let round = 0; ; round++) {
    let added = 0;
    for (const t of order) {
      const list = lists.get(t.key)!;
      const from = at.get(t.key) ?? 0;
      const share = round === 0 ? Math.max(1, t.weight - t.used) : t.weight;
      const to = Math.min(list.length, from + share);
      for (let i = from; i < to; i++) out.push(list[i]!);
      added += to - from;
      at.set(t.key, to);
    }
    if (added === 0) return out;
  }
}

/**
 * Several queues' candidate lists (each in its own serving order) as one:
 * repeatedly the head that comes first in claim order. A claim over fair
 * and other queues walks this.
 */
export function mergeByHeads<C extends { priority: number; runAt: number; id: number }>(lists: readonly (readonly C[])[]): C[] {
  const at = lists.map(() => 0);
  const out: C[] = [];
  for (;;) {
    let best = -1;
    for (let i = 0; i < lists.length; i++) {
      const head = lists[i]![at[i]!];
      if (head !== undefined && (best === -1 || byClaimOrder(head, lists[best]![at[best]!]!) < 0)) best = i;
    }
    if (best === -1) return out;
    out.push(lists[best]![at[best]!++]!);
  }
}

/**
 * The turn states a claim leaves: `taken` is the keys of the jobs it took,
 * in the order taken; `out` the keys that have no ready job left after it;
 * `base` the largest `served` stored for the queue. A key that took jobs
 * and finished a turn (reached its weight, or ran out of ready jobs) gets
 * `served` = base + the position of its last taken job (keys served by one
 * claim keep the order it served them in), and `used` what it took of the
 * turn after that; one that took jobs without finishing its turn keeps its
 * position and adds them to `used`. Keys that took nothing are unchanged
 * (absent from the result).
 */
export function advanceTurns(turns: readonly FairTurn[], taken: readonly string[], out: ReadonlySet<string>, base: number): Map<string, FairTurn> {
  const known = new Map(turns.map((t) => [t.key, t]));
  const count = new Map<string, number>();
  const last = new Map<string, number>();
  taken.forEach((key, i) => {
    count.set(key, (count.get(key) ?? 0) + 1);
    last.set(key, i + 1);
  });
  const next = new Map<string, FairTurn>();
  for (const [key, n] of count) {
    const t = known.get(key) ?? { key, weight: 1, served: 0, used: 0 };
    const total = t.used + n;
    if (out.has(key)) next.set(key, { ...t, served: base + last.get(key)!, used: 0 });
    else if (total >= t.weight) next.set(key, { ...t, served: base + last.get(key)!, used: total % t.weight });
    else next.set(key, { ...t, used: total });
  }
  return next;
}
