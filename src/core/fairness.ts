/**
 * Fair sharing, as one rule: within a queue, jobs are served in the order
 * of their fair tags, a virtual finish time each job gets when it is
 * enqueued (start-time fair queueing, decided at enqueue). A key's jobs
 * follow one another `UNIT ÷ weight` apart, starting from where its last
 * job ended or from the queue's virtual clock, whichever is later; the
 * clock stands just before the queue's first ready job. So a key that
 * floods a million jobs spreads them over a million units ahead, while a
 * key that enqueues one job now lands just before the queue's head: claims
 * take jobs in tag order (then id) and serve the keys in weighted
 * round-robin without reading or locking any key. The jobs of a fair queue
 * without a fairness key form one implicit key (IMPLICIT_FAIR_KEY, weight 1).
 *
 * Priorities order the jobs within one key: a claim of a queue that has
 * held prioritized fair jobs takes, for each key, the key's best jobs in
 * the places (tags) of that key's first ones, and gives the places its
 * taken jobs left to the key's remaining jobs (`withinKeys`).
 *
 * Adapters store each key's last tag, read the clock, and call `fairTags`
 * at enqueue; nothing here reads storage.
 *
 * The bound: a job enqueued for a key with no ready job is placed before
 * the queue's first ready job, so it is behind at most the jobs placed
 * before it since, at most ⌈Σ weights of the active keys ÷ jobs per
 * claim⌉ claims of its queue, however many jobs the other keys hold.
 */
import { byClaimOrder, type ClaimCandidate } from "./claim-order.ts";
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

/** The tag distance between successive jobs of a key of weight 1 (a key of weight w: UNIT ÷ w, rounded). */
export const FAIR_UNIT = 1_000_000;

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

/**
 * The queue's virtual clock for an enqueue: one unit before its first
 * ready job (`head`, the smallest tag of its ready jobs), so a key that
 * comes back (weight 1) lands in the head's place, after it and after the
 * keys that came back before it (ties go by id: first come, first served);
 * with no ready tagged job, `top` (the largest last tag of its keys), so
 * that every key starts level. Never below 0, where every key starts.
 */
export function fairClock(head: number | null, top: number): number {
  return Math.max(0, head === null ? top : head - FAIR_UNIT);
}

/**
 * The tags of `weights.length` successive jobs of one key whose last tag
 * is `last`, enqueued at clock `clock` (each job weighing its own weight),
 * and the key's last tag after them.
 */
export function fairTags(last: number, clock: number, weights: readonly number[]): { tags: number[]; last: number } {
  let at = Math.max(last, clock);
  const tags = weights.map((w) => (at += Math.max(1, Math.round(FAIR_UNIT / w))));
  return { tags, last: at };
}

/**
 * The tag of a fair job enqueued to run later without a concurrency key:
 * it has no place yet. Its key does not advance at enqueue; the job takes
 * its place when it falls due and is staged ready, from its key's last tag
 * or the queue's clock then, whichever is later (as a job enqueued then
 * would). A key that schedules a burst for one moment so goes round with
 * the keys that were waiting, instead of taking the places of that burst's
 * enqueue. (A retried or replayed job is placed again the same way; a job
 * with a concurrency key keeps its place: its key admits it slot by slot.)
 */
export const PLACED_WHEN_DUE = 0;

/** Whether a new fair job takes its place when it falls due (PLACED_WHEN_DUE) rather than at enqueue. */
export function placedWhenDue(job: { state: string; concurrency?: unknown }): boolean {
  return job.state === "scheduled" && !job.concurrency;
}

/**
 * One fairness key of a batch: its stored weight (the last job's); the
 * positions in the batch and weights of its jobs placed now, in batch
 * order; and the positions of those placed when due (PLACED_WHEN_DUE).
 */
export interface BatchKey {
  queue: string;
  name: string;
  weight: number;
  at: number[];
  weights: number[];
  due: number[];
}

/** The fairness keys a batch names, in (queue, name) order: the order their rows are locked in. */
export function fairKeysOf(jobs: readonly { queue: string; state: string; concurrency?: unknown; fairness?: FairnessSpec | null }[]): BatchKey[] {
  const groups = new Map<string, BatchKey>();
  jobs.forEach((j, i) => {
    if (!j.fairness) return;
    const id = JSON.stringify([j.queue, j.fairness.key]);
    const g = groups.get(id) ?? { queue: j.queue, name: j.fairness.key, weight: 1, at: [], weights: [], due: [] };
    g.weight = j.fairness.weight;
    if (placedWhenDue(j)) g.due.push(i);
    else {
      g.at.push(i);
      g.weights.push(j.fairness.weight);
    }
    groups.set(id, g);
  });
  return [...groups.values()].sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** A candidate of a fair queue: its tag (null: enqueued before its store knew the queue fair; served after the tagged ones). */
export type FairCandidate = ClaimCandidate & { fairTag: number | null };

const keyOf = (c: ClaimCandidate): string => c.fairKey ?? IMPLICIT_FAIR_KEY;

/** Fair order: tag, then id; untagged jobs after the tagged ones, in claim order. */
export function byFairOrder(a: FairCandidate, b: FairCandidate): number {
  if (a.fairTag === null || b.fairTag === null) return a.fairTag === null && b.fairTag === null ? byClaimOrder(a, b) : a.fairTag === null ? 1 : -1;
  return a.fairTag - b.fairTag || a.id - b.id;
}

/**
 * Priorities within keys. `window` is a claim's first candidates of a
 * queue in fair order; `best` holds, for each key with jobs in the window,
 * that key's first ready jobs in claim order (at least as many as it has in
 * the window; they may overlap it). Returns the candidates to walk: each
 * key's best jobs, as many as it had in the window, in the places (tags) of
 * its window jobs, in fair order; and `retag(chosen)`, the tags to write
 * after the claim took `chosen`: every job of `window` and `best` not taken
 * gets, in claim order within its key, the places the key's taken jobs did
 * not use, so no key gains or loses a place.
 */
export function withinKeys<C extends FairCandidate>(window: readonly C[], best: ReadonlyMap<string, readonly C[]>): { candidates: C[]; retag: (chosen: ReadonlySet<number>) => Map<number, number> } {
  const slots = new Map<string, number[]>();
  const pools = new Map<string, C[]>();
  for (const c of window) {
    if (c.fairTag === null) continue;
    slots.set(keyOf(c), [...(slots.get(keyOf(c)) ?? []), c.fairTag]);
  }
  const candidates: C[] = [];
  for (const [key, tags] of slots) {
    const seen = new Map<number, C>();
    for (const c of [...window.filter((w) => w.fairTag !== null && keyOf(w) === key), ...(best.get(key) ?? [])]) seen.set(c.id, c);
    const pool = [...seen.values()].sort(byClaimOrder);
    pools.set(key, pool);
    tags.sort((a, b) => a - b);
    pool.slice(0, tags.length).forEach((c, i) => candidates.push({ ...c, fairTag: tags[i]! }));
  }
  candidates.push(...window.filter((c) => c.fairTag === null));
  candidates.sort(byFairOrder);
  const placeOf = new Map(candidates.filter((c) => c.fairTag !== null).map((c) => [c.id, c.fairTag!]));
  const retag = (chosen: ReadonlySet<number>) => {
    const out = new Map<number, number>();
    for (const pool of pools.values()) {
      const used = new Set(pool.filter((c) => chosen.has(c.id)).map((c) => placeOf.get(c.id)!));
      const free = pool.map((c) => c.fairTag!).filter((t) => !used.delete(t)).sort((a, b) => a - b);
      const left = pool.filter((c) => !chosen.has(c.id));
      left.forEach((c, i) => {
        if (free[i] !== c.fairTag) out.set(c.id, free[i]!);
      });
    }
    return out;
  };
  return { candidates, retag };
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
