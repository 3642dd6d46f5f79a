import { sql } from "kysely";
import type { JobRecord } from "../../core/job.ts";
import { AdapterError } from "../../core/errors.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { rowToRecord, type JobRow } from "./row.ts";
import { compiledOnce, Slot } from "./compiled.ts";
import { labelled } from "./labels.ts";

/** The SQL type of each jobs column a new row sets: its values travel as one array parameter of this type. */
const COLUMN_TYPES: Readonly<Record<string, string>> = {
  task: "text",
  queue: "text",
  payload: "text",
  state: "text",
  priority: "integer",
  run_at: "bigint",
  attempt: "integer",
  max_attempts: "integer",
  backoff: "text",
  concurrency_key: "text",
  on_conflict: "text",
  timeout_ms: "bigint",
  idempotency_key: "text",
  trace_context: "text",
  created_at: "bigint",
  updated_at: "bigint",
  finished_at: "bigint",
  last_error: "text",
};

/** The columns a new row does not set: all null until a claim, an outcome or a handler writes them. */
export const UNSET_COLUMNS = { lease_token: null, lease_expires_at: null, result: null, progress: null, worker: null, errors: null } as const;

/**
 * UTF-16 code units of strings per statement. A code unit takes at most 3
 * UTF-8 bytes, and at most twice that in an array literal (escaped), so a
 * run stays well under PostgreSQL's 1 GB limit on a message's parameters.
 */
const MAX_RUN_UNITS = 128 * 1024 * 1024;

/**
 * `rows` in order, in runs whose strings hold at most MAX_RUN_UNITS code
 * units together (a row larger than that is a run of its own): each run is
 * one `insertArrays` statement. One run for any batch of ordinary size.
 */
export function arrayRuns(rows: readonly Record<string, unknown>[]): Record<string, unknown>[][] {
  const runs: Record<string, unknown>[][] = [];
  let run: Record<string, unknown>[] = [];
  let units = 0;
  for (const row of rows) {
    let size = 0;
    for (const value of Object.values(row)) if (typeof value === "string") size += value.length;
    if (run.length > 0 && units + size > MAX_RUN_UNITS) {
      runs.push(run);
      run = [];
      units = 0;
    }
    run.push(row);
    units += size;
  }
  if (run.length > 0) runs.push(run);
  return runs;
}

/**
 * Inserts `rows` (new jobs, each with the columns of COLUMN_TYPES, the same
 * in every row) with ONE statement, `INSERT … SELECT * FROM unnest($1::text[], …)
 * RETURNING id`: one array parameter per column, whatever the number of
 * rows, so its text is constant and compiled once (and prepared, where the
 * engine names statements). Returns the rows' records in input order: the
 * values written, with the ids the rows got. Assumes, as a multi-row INSERT
 * does, that the rows get ascending ids in the order unnest yields them.
 * Only for an engine with `arrays`; atomic on its own.
 */
export async function insertArrays(ctx: StoreContext, db: AnyDb, rows: readonly Record<string, unknown>[]): Promise<JobRecord[]> {
  const columns = Object.keys(rows[0]!);
  const build = () => {
    const arrays = columns.map((c) => {
      const type = COLUMN_TYPES[c];
      if (type === undefined) throw new AdapterError(`${ctx.engine.name}: no array type for jobs column ${c}`);
      return sql`${new Slot(c)}::${sql.raw(`${type}[]`)}`;
    });
    const insert = ctx.db
      .insertInto(ctx.tables.jobs)
      .columns(columns)
      .expression(sql`select * from unnest(${sql.join(arrays)})`)
      .returning("id");
    return labelled(insert, "enqueue");
  };
  const values: Record<string, unknown[]> = {};
  for (const c of columns) values[c] = rows.map((r) => r[c]);
  const key = `insert-arrays:${columns.join(",")}`;
  const result = await db.executeQuery(compiledOnce(ctx.statements, key, build, values, ctx.engine.prepare));
  const ids = (result.rows as { id: number | string | bigint }[]).map((r) => Number(r.id)).sort((a, b) => a - b);
  if (ids.length !== rows.length) throw new AdapterError(`${ctx.engine.name}: inserted ${ids.length} of ${rows.length} jobs`);
  // Object.assign, not an object spread: V8 copies these rows many times faster so.
  return rows.map((row, i) => rowToRecord(Object.assign({ id: ids[i]! }, UNSET_COLUMNS, row as Omit<JobRow, "id">)));
}
