/**
 * The claim rule, in one place: which ready jobs a claim takes, and in what
 * order. Adapters select candidates in CLAIM_ORDER and apply
 * `takeWithinCaps` to them; nothing here reads storage.
 */
import { InvalidArgumentError } from "./errors.ts";
import { shown } from "./shown.ts";

/** Claim order: priority (smaller first), then runAt (earlier first), then id. Also the order a key admits its waiting jobs. */
export const CLAIM_ORDER = ["priority", "runAt", "id"] as const;

export function byClaimOrder(a: { priority: number; runAt: number; id: number }, b: { priority: number; runAt: number; id: number }): number {
  return a.priority - b.priority || a.runAt - b.runAt || a.id - b.id;
}

/** A ready job a claim may take. */
export interface ClaimCandidate {
  id: number;
  task: string;
  queue: string;
  priority: number;
  runAt: number;
  concurrencyKey: string | null;
  /** The job's rate key (see RateLimitSpec), if any. */
  rateKey?: string | null;
  /** The job's fairness key (see FairnessSpec), if any. */
  fairKey?: string | null;
}

/**
 * What a claim may still take: the remaining cap of each capped queue and
 * task (a queue or task absent from its map has no cap), and `constrained`,
 * how many more constrained jobs (see `isConstrained`) it may take.
 */
export interface ClaimRoom {
  queues: Map<string, number>;
  tasks: Map<string, number>;
  constrained: number;
  /** The ids `takeWithinCaps` took as constrained, when given: the claim returns them first. */
  takenConstrained?: Set<number>;
  /** Starts left in the window of each rate-limited queue, task and rate key (absent: no limit). */
  rates?: RateRoom;
}

/**
 * Starts left per rate limit, and the rate keys found without any (passes
 * repeat without their jobs). `slack` holds, per queue and task limit, the
 * starts it lets a claim take unconstrained (see `isConstrained`).
 */
export interface RateRoom {
  queues: Map<string, number>;
  tasks: Map<string, number>;
  keys: Map<string, number>;
  spentKeys: Set<string>;
  slack: { queues: Map<string, number>; tasks: Map<string, number> };
}

export function rateRoomOf(): RateRoom {
  return { queues: new Map(), tasks: new Map(), keys: new Map(), spentKeys: new Set(), slack: { queues: new Map(), tasks: new Map() } };
}

/** Records a queue's, a task's or a rate key's limit in `rates`: `left` starts left in its window, `slack` of them takeable unconstrained (see rate-limit.ts rateSlack; unused for a key). */
export function holdRate(rates: RateRoom, scope: "queue" | "task" | "key", name: string, left: number, slack: number): void {
  if (scope === "key") {
    rates.keys.set(name, left);
    return;
  }
  rates[scope === "queue" ? "queues" : "tasks"].set(name, left);
  rates.slack[scope === "queue" ? "queues" : "tasks"].set(name, Math.min(left, slack));
}

/**
 * Whether `c` holds a slot that another worker could use: it has a
 * concurrency key or a rate key, or its queue or task has a cap, or a rate
 * limit (in `room`) without slack (see rate-limit.ts rateSlack: a limit that
 * binds, or is more than half used). A job so limited is constrained so
 * that its start is its claim: it never waits in a buffer holding a unit of
 * a window that is close to full. While each of its queue's and task's
 * limits has slack, a job may be taken into a worker's buffer like an
 * unconstrained one: its start is still logged at its claim, so the limit
 * holds on claims exactly, and a worker keeps prefetching through a limit
 * that does not bind. A rate key's jobs are always constrained.
 */
export function isConstrained(c: Pick<ClaimCandidate, "queue" | "task" | "concurrencyKey" | "rateKey">, room: ClaimRoom): boolean {
  if (c.concurrencyKey !== null || (c.rateKey ?? null) !== null || room.queues.has(c.queue) || room.tasks.has(c.task)) return true;
  const rates = room.rates;
  if (rates === undefined) return false;
  if (rates.queues.has(c.queue) && !((rates.slack.queues.get(c.queue) ?? 0) > 0)) return true;
  return rates.tasks.has(c.task) && !((rates.slack.tasks.get(c.task) ?? 0) > 0);
}

/** Starts a queue's limit lets a claim take beyond its room for constrained jobs (0 when capped: a cap binds whatever the rate). */
export function rateSlack(room: ClaimRoom, queue: string): number {
  return room.queues.has(queue) ? 0 : (room.rates?.slack.queues.get(queue) ?? 0);
}

/**
 * The greedy cap rule, one pass: walks `candidates` (in claim order) and
 * takes each one unless its queue's or its task's room (remaining cap, or
 * remaining starts of a rate limit) is used up, until `chosen` holds
 * `limit` ids. A job whose rate key has no starts left stops the pass as a
 * full task does, its key added to `room.rates.spentKeys`. Takes room as it goes (mutating
 * `room`) and adds tasks whose room reaches 0 to `exhausted`. Stops and
 * returns true ("passed over") at the first job of a full task, or at the
 * first constrained job once `room.constrained` is 0 (its task, when
 * capped, joins `exhausted`): the caller must look again without the
 * exhausted tasks (and, once `room.constrained` is 0, without any
 * constrained job), because the candidates' windows may hide, behind that
 * job, one that precedes the rest of the pass.
 */
export function takeWithinCaps(candidates: readonly ClaimCandidate[], limit: number, room: ClaimRoom, chosen: number[], exhausted: Set<string>): boolean {
  for (const c of candidates) {
    if (chosen.length >= limit) return false;
    const queueRoom = room.queues.get(c.queue);
    if (queueRoom !== undefined && queueRoom <= 0) continue;
    const rates = room.rates;
    const queueRate = rates?.queues.get(c.queue);
    if (queueRate !== undefined && queueRate <= 0) continue;
    const taskRoom = room.tasks.get(c.task);
    const taskRate = rates?.tasks.get(c.task);
    if ((taskRoom !== undefined && taskRoom <= 0) || (taskRate !== undefined && taskRate <= 0)) {
      exhausted.add(c.task);
      return true;
    }
    const rateKey = c.rateKey ?? null;
    const keyRate = rateKey === null ? undefined : rates?.keys.get(rateKey);
    if (keyRate !== undefined && keyRate <= 0) {
      rates!.spentKeys.add(rateKey!);
      return true;
    }
    const constrained = isConstrained(c, room);
    if (constrained && room.constrained <= 0) {
      if (taskRoom !== undefined || taskRate !== undefined) exhausted.add(c.task);
      return true;
    }
    if (taskRoom !== undefined) {
      room.tasks.set(c.task, taskRoom - 1);
      if (taskRoom - 1 === 0) exhausted.add(c.task);
    }
    if (taskRate !== undefined) {
      rates!.tasks.set(c.task, taskRate - 1);
      rates!.slack.tasks.set(c.task, Math.max(0, (rates!.slack.tasks.get(c.task) ?? 0) - 1));
      if (taskRate - 1 === 0) exhausted.add(c.task);
    }
    if (queueRoom !== undefined) room.queues.set(c.queue, queueRoom - 1);
    if (queueRate !== undefined) {
      rates!.queues.set(c.queue, queueRate - 1);
      rates!.slack.queues.set(c.queue, Math.max(0, (rates!.slack.queues.get(c.queue) ?? 0) - 1));
    }
    if (keyRate !== undefined) {
      rates!.keys.set(rateKey!, keyRate - 1);
      if (keyRate - 1 === 0) rates!.spentKeys.add(rateKey!);
    }
    if (constrained) {
      room.constrained--;
      room.takenConstrained?.add(c.id);
    }
    chosen.push(c.id);
  }
  return false;
}

/**
 * A claim's `limit` and `constrainedLimit` (when given), checked: each an
 * integer >= 0, else InvalidArgumentError. Returns how many constrained
 * jobs the claim may take (`constrainedLimit`, or `limit` when absent).
 */
export function claimLimits(params: { limit: unknown; constrainedLimit?: unknown }): number {
  const { limit, constrainedLimit } = params;
  if (!isCount(limit)) throw new InvalidArgumentError(`claim: limit must be an integer >= 0, got ${shown(limit)}`);
  if (constrainedLimit === undefined) return limit;
  if (!isCount(constrainedLimit)) throw new InvalidArgumentError(`claim: constrainedLimit must be an integer >= 0, got ${shown(constrainedLimit)}`);
  return constrainedLimit;
}

function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

/** The claimed jobs in the order `claim` returns them: with `constrainedFirst`, the constrained ones first; each part in claim order. */
export function claimedOrder<J extends { priority: number; runAt: number; id: number }>(jobs: J[], constrainedFirst: ((job: J) => boolean) | null): J[] {
  jobs.sort(byClaimOrder);
  if (constrainedFirst === null) return jobs;
  return [...jobs.filter(constrainedFirst), ...jobs.filter((j) => !constrainedFirst(j))];
}
