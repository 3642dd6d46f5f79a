import type { SettledJob } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { CLAIM_ORDER } from "../../core/claim-order.ts";
import { isJobState } from "../../core/states.ts";
import { AdapterError } from "../../core/errors.ts";

/**
 * A jobs row as drivers return it. Integer columns may arrive as number,
 * string (pg int8) or bigint; `rowToRecord` normalizes them.
 */
export interface JobRow {
  id: number | string | bigint;
  task: string;
  queue: string;
  payload: string;
  state: string;
  priority: number | string;
  run_at: number | string | bigint;
  attempt: number | string;
  max_attempts: number | string;
  backoff: string | null;
  concurrency_key: string | null;
  on_conflict: string | null;
  rate_key?: string | null;
  fair_key?: string | null;
  fair_tag?: number | string | bigint | null;
  timeout_ms: number | string | bigint | null;
  lease_token: string | null;
  lease_expires_at: number | string | bigint | null;
  created_at: number | string | bigint;
  updated_at: number | string | bigint;
  started_at?: number | string | bigint | null;
  finished_at: number | string | bigint | null;
  last_error: string | null;
  idempotency_key: string | null;
  debounce_key?: string | null;
  trace_context?: string | null;
  result: string | null;
  progress: string | null;
  worker?: string | null;
  errors?: string | null;
  steps?: string | null;
}

function int(v: number | string | bigint): number {
  return typeof v === "number" ? v : Number(v);
}

function intOrNull(v: number | string | bigint | null): number | null {
  return v === null ? null : int(v);
}

export function rowToRecord(row: JobRow): JobRecord {
  if (!isJobState(row.state)) throw new AdapterError(`job ${String(row.id)} has unknown state ${row.state}`);
  return {
    id: int(row.id),
    task: row.task,
    queue: row.queue,
    payload: row.payload,
    state: row.state,
    priority: int(row.priority),
    runAt: int(row.run_at),
    attempt: int(row.attempt),
    maxAttempts: int(row.max_attempts),
    backoff: row.backoff,
    concurrencyKey: row.concurrency_key,
    onConflict: row.on_conflict === "block" || row.on_conflict === "discard" ? row.on_conflict : null,
    rateKey: row.rate_key ?? null,
    fairKey: row.fair_key ?? null,
    timeoutMs: intOrNull(row.timeout_ms),
    leaseToken: row.lease_token,
    leaseExpiresAt: intOrNull(row.lease_expires_at),
    createdAt: int(row.created_at),
    updatedAt: int(row.updated_at),
    startedAt: intOrNull(row.started_at ?? null),
    finishedAt: intOrNull(row.finished_at),
    lastError: row.last_error,
    idempotencyKey: row.idempotency_key ?? null,
    debounceKey: row.debounce_key ?? null,
    traceContext: row.trace_context ?? null,
    result: row.result ?? null,
    progress: row.progress ?? null,
    worker: row.worker ?? null,
    errors: row.errors ?? null,
    steps: row.steps ?? null,
  };
}

/** A claim's `rows` as records, each job with a place in a fair queue marked (`fairQueue`). */
export function claimedRecords(rows: readonly JobRow[]): JobRecord[] {
  return rows.map((row) => {
    const record = rowToRecord(row);
    if (row.fair_tag !== null && row.fair_tag !== undefined) record.fairQueue = true;
    return record;
  });
}

/** The columns `settle` reads back: what an outcome changes, and the queue (for ready notices). */
export const SETTLED_COLUMNS = ["id", "state", "attempt", "run_at", "updated_at", "finished_at", "last_error", "lease_token", "lease_expires_at", "queue", "result", "concurrency_key"];
export type SettledRow = Pick<JobRow, "id" | "state" | "attempt" | "run_at" | "updated_at" | "finished_at" | "last_error" | "lease_token" | "lease_expires_at" | "queue" | "result" | "concurrency_key">;

export function rowToSettled(row: SettledRow): SettledJob {
  if (!isJobState(row.state)) throw new AdapterError(`job ${String(row.id)} has unknown state ${row.state}`);
  return {
    id: int(row.id),
    state: row.state,
    attempt: int(row.attempt),
    runAt: int(row.run_at),
    updatedAt: int(row.updated_at),
    finishedAt: intOrNull(row.finished_at),
    lastError: row.last_error,
    leaseToken: row.lease_token,
    leaseExpiresAt: intOrNull(row.lease_expires_at),
    result: row.result ?? null,
  };
}

const CLAIM_ORDER_COLUMNS = { priority: "priority", runAt: "run_at", id: "id" } as const;

/** Orders a jobs query by the core's CLAIM_ORDER. */
// deno-lint-ignore no-explicit-any
export function inClaimOrder<Q extends { orderBy: (column: string) => any }>(query: Q): Q {
  let q = query;
  for (const field of CLAIM_ORDER) q = q.orderBy(CLAIM_ORDER_COLUMNS[field]);
  return q;
}
