import { sql } from "kysely";
import type { EnqueuedRecord } from "../../core/adapter.ts";
import { DEBOUNCE_PENDING_STATES, mergedRunAt, type DebounceSpec } from "../../core/debounce.ts";
import { TRANSITIONS } from "../../core/transitions.ts";
import { AdapterError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { applyTransition } from "./guard.ts";
import { labelled } from "./labels.ts";
import { GUARD_COLUMN } from "./guard-writes.ts";
import { rowToRecord, type JobRow } from "./row.ts";

/**
 * The columns a merge takes from the last enqueue (besides its run time,
 * `mergedRunAt`). The rate key and fairness key too: the enqueue stored
 * their rows before it merged, and the merged job is scheduled, so its
 * fairness tag is the one a scheduled job gets (placed when due, or none).
 */
const MERGED_COLUMNS = ["payload", "priority", "max_attempts", "backoff", "timeout_ms", "trace_context", "rate_key", "fair_key", "fair_tag"] as const;

/** The core's `mergedRunAt` in SQL, for a merge written in one statement: `createdAt` is the pending row's column. */
function mergedRunAtSql(spec: DebounceSpec, now: number, createdAt: ReturnType<typeof sql.ref>) {
  return spec.maxWaitMs === null ? sql`${now + spec.delayMs}` : sql`least(${now + spec.delayMs}, ${createdAt} + ${spec.maxWaitMs})`;
}

/**
 * A debounced job's enqueue, inside the caller's transaction: finds the
 * pending job of its queue, task and key and locks it (`FOR UPDATE` where
 * the engine has row locks; a single writer holds every row), then merges
 * into it with the guarded `debounce` write: the new job's payload and
 * options, run time `mergedRunAt`, state scheduled. With no pending job it
 * inserts `row`. R22: a claim moves the job out of pending under the same
 * row lock, so the merge either lands first (the claim, waiting or passing
 * the row over, runs the merged job) or finds no pending job (the claim
 * committed: it inserts the key's next job). Two enqueues that both find
 * none meet at the schema's unique index of pending debounce keys: the
 * second insert waits for the first and, once it committed, stores nothing
 * (`ON CONFLICT DO NOTHING`, or a duplicate key the engine reports), and
 * this call looks again and merges. `insertRow` stores a row on an engine
 * without ON CONFLICT (the enqueue's own insert, which reads the row back).
 */
export async function mergeOrInsert(
  ctx: StoreContext,
  db: AnyDb,
  row: Record<string, unknown>,
  spec: DebounceSpec,
  now: number,
  insertRow: (row: Record<string, unknown>) => Promise<JobRecord>,
): Promise<EnqueuedRecord> {
  const { engine, tables } = ctx;
  for (let attempt = 1; attempt <= 3; attempt++) {
    const pending = await pendingJob(ctx, db, row, spec.key);
    if (pending) {
      const merged = await applyTransition(ctx, db, "debounce", { id: pending.id, now }, {
        ...Object.fromEntries(MERGED_COLUMNS.map((c) => [c, row[c]])),
        run_at: mergedRunAt(spec, pending.createdAt, now),
      });
      if (merged) return { ...merged, created: false };
      // Claimed between the read and the write (possible only where the read took no lock): insert the next job.
    }
    let inserted: JobRecord | null = null;
    if (engine.capabilities.onConflict) {
      const insert = db.insertInto(tables.jobs).values(row).onConflict((oc) => oc.doNothing()).returningAll();
      const rows = (await labelled(insert, "enqueue").execute()) as JobRow[];
      inserted = rows[0] ? rowToRecord(rows[0]) : null;
    } else {
      // No ON CONFLICT: the engine keeps the transaction usable after a duplicate key (MySQL rolls back the statement only).
      try {
        inserted = await insertRow(row);
      } catch (error) {
        if (!engine.isUniqueViolation(error)) throw error;
      }
    }
    if (inserted) return { ...inserted, created: true };
    // A concurrent enqueue's pending job for the key committed first: merge into it.
  }
  throw new AdapterError(`${engine.name}: debounce key ${JSON.stringify(spec.key)} kept changing hands; nothing was stored`);
}

/** The pending job of `row`'s queue and task with debounce key `key`, locked where the engine has row locks; or null. */
async function pendingJob(ctx: StoreContext, db: AnyDb, row: Record<string, unknown>, key: string): Promise<JobRecord | null> {
  let find = db
    .selectFrom(ctx.tables.jobs)
    .selectAll()
    .where(ctx.engine.debouncePendingColumn ?? "debounce_key", "=", key)
    .where("queue", "=", row.queue as string)
    .where("task", "=", row.task as string)
    // Literals: the states of the pending index's predicate, so the planner can prove that index applies.
    .where("state", "in", DEBOUNCE_PENDING_STATES.map((s) => sql.lit(s)));
  if (ctx.engine.capabilities.rowLocks) find = find.forUpdate();
  const found = (await labelled(find, "debounce-find").executeTakeFirst()) as JobRow | undefined;
  return found ? rowToRecord(found) : null;
}

/** The column of `upsertDebounced`'s RETURNING that holds the engine's inserted flag. */
const INSERTED = "docket_inserted";

/**
 * A debounced job's enqueue in ONE statement, where the engine tells an
 * inserted row from an updated one (`Engine.insertedFlag`): `INSERT … ON
 * CONFLICT` on the unique index of pending debounce keys `DO UPDATE` with
 * the `debounce` write (the core's guard on the pending row's state, the
 * new job's payload and options, run time `mergedRunAt` in SQL). R22 in the
 * database: a claim holding the pending row makes the statement wait for it;
 * once the claim committed, the row is no longer pending (it left the
 * partial index), so the statement inserts the key's next job; a merge
 * that commits first is what the claim then reads. Returns null, having
 * written nothing, when the pending job is in a state the merge may not
 * move (the caller then takes `mergeOrInsert`).
 */
export async function upsertDebounced(ctx: StoreContext, db: AnyDb, row: Record<string, unknown>, spec: DebounceSpec, now: number): Promise<EnqueuedRecord | null> {
  const { engine, tables } = ctx;
  const pendingStates = DEBOUNCE_PENDING_STATES.map((s) => sql.lit(s));
  const upsert = db
    .insertInto(tables.jobs)
    .values(row)
    .onConflict((oc) =>
      oc
        .columns(["queue", "task", "debounce_key"])
        .where("debounce_key", "is not", null)
        .where("state", "in", pendingStates)
        .doUpdateSet(() => ({
          ...Object.fromEntries(MERGED_COLUMNS.map((c) => [c, sql.ref(`excluded.${c}`)])),
          run_at: mergedRunAtSql(spec, now, sql.ref(`${tables.jobs}.created_at`)),
          state: sql.lit(TRANSITIONS.debounce.to),
          updated_at: now,
        }))
        .where(sql.ref(`${tables.jobs}.state`), "in", TRANSITIONS.debounce.from.map((s) => sql.lit(s))),
    )
    .returningAll()
    .returning(engine.insertedFlag!.as(INSERTED));
  const found = (await labelled(upsert, "enqueue").executeTakeFirst()) as (JobRow & { [INSERTED]: boolean }) | undefined;
  if (!found) return null;
  const { [INSERTED]: inserted, ...stored } = found;
  return { ...rowToRecord(stored as JobRow), created: inserted === true };
}

/**
 * `upsertDebounced` where the engine has `INSERT … ON DUPLICATE KEY UPDATE
 * … RETURNING` instead (Engine.duplicateKeyUpsert): the same one statement,
 * meeting the one-column unique index of pending debounce keys. Each
 * assignment of the update is guarded by the core's `debounce` rule on the
 * pending row's state, read before any assignment moves it (the state is
 * assigned last), so a pending job the merge may not move is left as it
 * was, and the call returns null having written nothing (the caller then
 * takes `mergeOrInsert`). The row is inserted with guard column 0 and a
 * merge adds one to it: RETURNING's row tells an insert (0) from a merge. R22
 * as `upsertDebounced`: the duplicate check waits for a claim holding the
 * pending row; once the claim committed, the row's slot is NULL and the
 * statement inserts the key's next job.
 */
export async function upsertOnDuplicate(ctx: StoreContext, db: AnyDb, row: Record<string, unknown>, spec: DebounceSpec, now: number): Promise<EnqueuedRecord | null> {
  const { tables } = ctx;
  const movable = sql`${sql.ref("state")} in (${sql.join(TRANSITIONS.debounce.from.map((s) => sql.lit(s)))})`;
  const merged = (to: unknown, column: string) => sql`if(${movable}, ${to}, ${sql.ref(column)})`;
  const upsert = db
    .insertInto(tables.jobs)
    .values({ ...row, [GUARD_COLUMN]: 0 })
    .onDuplicateKeyUpdate({
      ...Object.fromEntries(MERGED_COLUMNS.map((c) => [c, merged(sql`values(${sql.ref(c)})`, c)])),
      run_at: merged(mergedRunAtSql(spec, now, sql.ref("created_at")), "run_at"),
      updated_at: merged(sql`${now}`, "updated_at"),
      [GUARD_COLUMN]: merged(sql`${sql.ref(GUARD_COLUMN)} + 1`, GUARD_COLUMN),
      state: merged(sql.lit(TRANSITIONS.debounce.to), "state"),
    })
    .returningAll();
  // Sent as a query: kysely's insert drops RETURNING's rows on this dialect.
  const found = (await db.executeQuery(labelled(upsert, "enqueue").compile())).rows[0] as (JobRow & { [GUARD_COLUMN]: unknown }) | undefined;
  if (!found) throw new AdapterError(`${ctx.engine.name}: a debounced enqueue returned no row`);
  const { [GUARD_COLUMN]: seq, ...stored } = found;
  // A row in a state the merge may not move was left as it was (an inserted one is scheduled or ready, a merged one scheduled).
  if (!(TRANSITIONS.debounce.from as readonly string[]).includes(stored.state as string)) return null;
  return { ...rowToRecord(stored as JobRow), created: Number(seq) === 0 };
}
