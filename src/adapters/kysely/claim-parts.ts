/**
 * What the claim paths share (claim.ts: the one-statement claim;
 * controls-claim.ts: the transaction that applies controls; hand-off.ts):
 * the store's memory of caps met, the control predicates, and the columns a
 * claim writes.
 */
import { sql, type ExpressionBuilder } from "kysely";
import type { ClaimParams, SettleItem } from "../../core/adapter.ts";
import { TRANSITIONS } from "../../core/transitions.ts";
import type { JobRow } from "./row.ts";
import type { ClaimFloor } from "./claim-floor.ts";

/** How long after a claim met a cap the next claims go straight to the transaction that applies caps. */
export const CAPS_MEMORY_MS = 1000;

/**
 * How often, at most, an empty claim of a fair queue in fair order looks for
 * its untagged jobs while none were found lately; within this long after a
 * look found some, every such claim looks (see claim.ts).
 */
export const UNTAGGED_LOOK_MS = 1000;

/** What one store remembers between claims: when a claim last met a cap on its queues or tasks, and when one last looked for untagged fair jobs. */
export interface ClaimMemory {
  capsSeenAt: number;
  /** When a claim last looked for a fair queue's untagged jobs, and when one last found some. */
  untaggedLookedAt: number;
  untaggedFoundAt: number;
  /** Queues read with a rate limit and no cap: a claim with no room for constrained jobs locks them exclusively, to take their slack (see isConstrained). */
  rateQueues: Set<string>;
  /** Queues and tasks read with a cap: an outcome that frees one of their slots may be announced (see freedCapQueues). */
  capped: { queues: Set<string>; tasks: Set<string> };
  /** The claims' floors, by queue and task set (see claim-floor.ts). */
  floors: Map<string, ClaimFloor>;
  /** When a rate-limited queue's one-statement claim in the controls transaction last claimed nothing where the transaction then claimed jobs (see controls-claim.ts slackClaim). */
  slackMissedAt: number;
}

export function claimMemory(): ClaimMemory {
  return { capsSeenAt: Number.NEGATIVE_INFINITY, untaggedLookedAt: Number.NEGATIVE_INFINITY, untaggedFoundAt: Number.NEGATIVE_INFINITY, rateQueues: new Set(), capped: { queues: new Set(), tasks: new Set() }, floors: new Map(), slackMissedAt: Number.NEGATIVE_INFINITY };
}

/**
 * The queues whose cap slots written outcomes freed: the queue of each
 * outcome written (`results[i]` not null) whose job's queue or task this
 * store knows capped (`memory.capped`), less the slots a hand-off took
 * again in the same write (`reused`: jobs it claimed, by queue). Other
 * processes' idle workers should hear of these (see notice-window.ts).
 */
export function freedCapQueues(memory: ClaimMemory, items: readonly SettleItem[], results: readonly unknown[], reused: readonly { queue: string }[] = []): string[] {
  if (memory.capped.queues.size === 0 && memory.capped.tasks.size === 0) return [];
  const freed = new Map<string, number>();
  items.forEach((item, i) => {
    if (results[i] === null || item.queue === undefined) return;
    if (memory.capped.queues.has(item.queue) || (item.task !== undefined && memory.capped.tasks.has(item.task))) freed.set(item.queue, (freed.get(item.queue) ?? 0) + 1);
  });
  for (const job of reused) if (freed.has(job.queue)) freed.set(job.queue, freed.get(job.queue)! - 1);
  return [...freed].filter(([, n]) => n > 0).map(([queue]) => queue);
}

/** A queue or task control row with a control a claim counts under the row's exclusive lock: a cap or a rate limit. */
// deno-lint-ignore no-explicit-any
export const countedControl = (eb: ExpressionBuilder<any, any>) => eb.or([eb("max_running", "is not", null), eb("rate_limit", "is not", null)]);

/**
 * The columns a claim sets besides the attempt: running under the claim's lease, by the claiming worker,
 * started at the claim's time, and no longer holding a debounce key (a merge never reaches a job that ran, also once it is retried,
 * released or replayed: see NewJob.debounce).
 */
function claimedValues(params: ClaimParams, startedAt: number) {
  return {
    state: TRANSITIONS.claim.to,
    debounce_key: null,
    lease_token: params.leaseToken,
    lease_expires_at: params.leaseExpiresAt,
    worker: params.worker ?? null,
    updated_at: params.now,
    started_at: startedAt,
  };
}

/** A claim's SET: `claimedValues` and attempt + 1. */
export function claimSet(params: ClaimParams, startedAt = params.now): Record<string, unknown> {
  return { ...claimedValues(params, startedAt), attempt: sql`attempt + 1` };
}

/** The row a claim's SET makes of `row`, read under this transaction's lock before the UPDATE. */
export function claimedRow(row: JobRow, params: ClaimParams, startedAt = params.now): JobRow {
  return { ...row, ...claimedValues(params, startedAt), attempt: Number(row.attempt) + 1 };
}

/**
 * `q` without keyed jobs. `coalesce(key, '') <= ''` is `key IS NULL` (keys are never empty) in a form PostgreSQL
 * estimates at a third of the ready jobs: from `IS NULL` it took the table's share of unkeyed rows, which keyed
 * history makes small, and then read and sorted every ready job rather than the claim index's first ones (3.6 ms
 * against 1.2 ms to claim 100 of 5,000 ready behind 100,000 keyed finished jobs, EXPLAIN ANALYZE of custom plans).
 */
// deno-lint-ignore no-explicit-any
export function unkeyed<Q extends { where: (...args: any[]) => any }>(q: Q): Q {
  return q.where(sql`coalesce(${sql.ref("concurrency_key")}, '')`, "<=", "");
}
