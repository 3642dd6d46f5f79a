import { sql } from "kysely";
import type { EnqueuedRecord, NewJob } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { AdapterError } from "../../core/errors.ts";
import { newJobRecord } from "../../core/new-job.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { compiledOnce, Slot } from "./compiled.ts";
import { labelled } from "./labels.ts";

/** The columns that differ from job to job, with their SQL types: each travels as one array parameter. */
export const ARRAY_COLUMNS = [
  ["task", "text"],
  ["queue", "text"],
  ["payload", "text"],
  ["state", "text"],
  ["priority", "integer"],
  ["run_at", "bigint"],
  ["max_attempts", "integer"],
  ["backoff", "text"],
  ["timeout_ms", "bigint"],
  ["trace_context", "text"],
] as const;

/** Besides ARRAY_COLUMNS, the columns a keyed job's admission decides (blocked, or cancelled by a "discard" policy, with its reason). */
const ADMISSION_COLUMNS = [
  ["concurrency_key", "text"],
  ["on_conflict", "text"],
  ["rate_key", "text"],
  ["fair_key", "text"],
  ["fair_tag", "bigint"],
  ["finished_at", "bigint"],
  ["last_error", "text"],
] as const;

/**
 * UTF-16 code units of strings per statement. A code unit takes at most 3
 * UTF-8 bytes, and at most twice that in an array literal (escaped), so a
 * run stays well under PostgreSQL's 1 GB limit on a message's parameters.
 */
const MAX_RUN_UNITS = 128 * 1024 * 1024;

/**
 * `jobs` in order, in runs whose strings hold at most `maxUnits` code units
 * together (a job larger than that is a run of its own): each run is one
 * `insertUnkeyed` statement. One run for any batch of ordinary size.
 */
export function arrayRuns(jobs: readonly NewJob[], maxUnits = MAX_RUN_UNITS): NewJob[][] {
  const runs: NewJob[][] = [];
  let run: NewJob[] = [];
  let units = 0;
  for (const job of jobs) {
    const size = job.task.length + job.queue.length + job.payload.length + (job.backoff?.length ?? 0) + (job.traceContext?.length ?? 0);
    if (run.length > 0 && units + size > maxUnits) {
      runs.push(run);
      run = [];
      units = 0;
    }
    run.push(job);
    units += size;
  }
  if (run.length > 0) runs.push(run);
  return runs;
}

/**
 * Inserts `jobs`, new jobs with neither a concurrency key nor an
 * idempotency key, created at `now`, with ONE statement: `INSERT … SELECT
 * t.*, 0, $now, $now FROM unnest($1::text[], …) AS t RETURNING id`, one
 * array parameter per column that differs between jobs, whatever their
 * number, so its text is constant, compiled once (and prepared, where the
 * engine names statements). Returns their records in input order: the
 * values written, with the ids the rows got. Assumes, as a multi-row INSERT
 * does, that the rows get ascending ids in the order unnest yields them.
 * Only for an engine with `arrays`; atomic on its own.
 */
export async function insertUnkeyed(ctx: StoreContext, db: AnyDb, jobs: readonly NewJob[], now: number): Promise<EnqueuedRecord[]> {
  const n = jobs.length;
  const task = new Array<string>(n);
  const queue = new Array<string>(n);
  const payload = new Array<string>(n);
  const state = new Array<string>(n);
  const priority = new Array<number>(n);
  const runAt = new Array<number>(n);
  const maxAttempts = new Array<number>(n);
  const backoff = new Array<string | null>(n);
  const timeout = new Array<number | null>(n);
  const trace = new Array<string | null>(n);
  for (let i = 0; i < n; i++) {
    const j = jobs[i]!;
    task[i] = j.task;
    queue[i] = j.queue;
    payload[i] = j.payload;
    state[i] = j.state;
    priority[i] = j.priority;
    runAt[i] = j.runAt;
    maxAttempts[i] = j.maxAttempts;
    backoff[i] = j.backoff;
    timeout[i] = j.timeoutMs ?? null;
    trace[i] = j.traceContext ?? null;
  }
  const values = { task, queue, payload, state, priority, run_at: runAt, max_attempts: maxAttempts, backoff, timeout_ms: timeout, trace_context: trace, now };
  const ids = await unnestInsert(ctx, db, "insert-unkeyed", ARRAY_COLUMNS, values, n);
  return jobs.map((j, i) => created(newJobRecord(ids[i]!, j, now)));
}

/**
 * Inserts admitted rows (the values `rowsOf` made, their state, finish time
 * and reason set by admission; no idempotency key), created at `now`, with
 * ONE statement like `insertUnkeyed`'s plus the admission columns as arrays.
 * Returns the ids the rows got, in input order (ascending, as unnest yields
 * them). Only for an engine with `arrays`; atomic on its own, so the caller
 * may run it inside its transaction.
 */
export async function insertAdmittedRows(ctx: StoreContext, db: AnyDb, rows: readonly Record<string, unknown>[], now: number): Promise<number[]> {
  // A batch with parents (EnqueueOptions.after) also carries each row's count of parents and its parent mark.
  const deps = rows.some((r) => "waiting_on" in r);
  // A batch whose admission columns are all null (no key, nothing blocked or discarded: a graph of plain jobs) sends none of them.
  const admission = rows.some((r) => ADMISSION_COLUMNS.some(([column]) => r[column] != null));
  const columns = [...ARRAY_COLUMNS, ...(admission ? ADMISSION_COLUMNS : []), ...(deps ? DEPENDENCY_COLUMNS : [])];
  const values: Record<string, unknown> = { now };
  for (const [column] of columns) values[column] = rows.map((r) => r[column] ?? (column === "waiting_on" || column === "has_children" ? 0 : null));
  return unnestInsert(ctx, db, `insert-${admission ? "admitted" : "plain"}${deps ? "-deps" : ""}`, columns, values, rows.length);
}

/** The dependency columns a batch with parents writes at insert (see kysely/dependencies.ts). */
const DEPENDENCY_COLUMNS = [
  ["waiting_on", "integer"],
  ["has_children", "smallint"],
] as const;

/**
 * `INSERT INTO jobs (<columns>, attempt, created_at, updated_at) SELECT t.*, 0, $now, $now FROM
 * unnest(<one array slot per column>) AS t RETURNING id`, compiled once under `key`, with `values`
 * (an array per column, and `now`); the ids, ascending. Throws unless exactly `n` rows were inserted.
 */
async function unnestInsert(
  ctx: StoreContext,
  db: AnyDb,
  key: string,
  columns: readonly (readonly [string, string])[],
  values: Readonly<Record<string, unknown>>,
  n: number,
): Promise<number[]> {
  const build = () => {
    const arrays = columns.map(([column, type]) => sql`${new Slot(column)}::${sql.raw(`${type}[]`)}`);
    const insert = ctx.db
      .insertInto(ctx.tables.jobs)
      .columns([...columns.map(([column]) => column), "attempt", "created_at", "updated_at"])
      .expression(sql`select t.*, 0, ${new Slot("now")}::bigint, ${new Slot("now")}::bigint from unnest(${sql.join(arrays)}) as t`)
      .returning("id");
    return labelled(insert, "enqueue");
  };
  const result = await db.executeQuery(compiledOnce(ctx.statements, key, build, values, ctx.engine.prepare));
  const ids = (result.rows as { id: number | string | bigint }[]).map((r) => Number(r.id)).sort((a, b) => a - b);
  if (ids.length !== n) throw new AdapterError(`${ctx.engine.name}: inserted ${ids.length} of ${n} jobs`);
  return ids;
}

/** `record` (a fresh object the calling enqueue made) marked created, in place: a spread copy of its 30 fields per job cost more than the rest of an enqueue's JS. */
export function created(record: JobRecord): EnqueuedRecord {
  (record as EnqueuedRecord).created = true;
  return record as EnqueuedRecord;
}
