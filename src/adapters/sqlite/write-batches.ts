/**
 * The write transactions of one process, in call order, several to one
 * SQLite transaction when they queue (group commit).
 *
 * SQLite has one writer per file, and every write transaction in a process
 * waits here before `BEGIN IMMEDIATE` (the drivers are synchronous: a second
 * connection in the process waiting on SQLite's lock would block the event
 * loop, so the holder could never commit). Under load each waiting write
 * also waits for the file's lock against other processes: a process with
 * 100 concurrent enqueues took the lock 100 times, each time after the other
 * processes' transactions, and its enqueues waited 170 ms at p50 behind a
 * flood (bench/fairness.ts). Here the writes that queued while the previous
 * transaction ran share the next one.
 *
 * Contract, for the caller of `run`:
 * - `work` runs inside a transaction of its own or inside a savepoint of a
 *   shared one; either way its writes commit together or not at all, and
 *   the promise settles after the COMMIT that made them durable (or with
 *   the error that undid them). That holds whatever savepoints the work
 *   opens itself and leaves open (its own savepoint's name is unique).
 * - A `work` that throws undoes only its own writes (ROLLBACK TO its
 *   savepoint) and rejects with its error; the others in its transaction
 *   are unaffected.
 * - An error that ends the whole transaction (SQLite rolls back on
 *   SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM…; or a failed COMMIT) rejects
 *   every `work` the transaction ran with that error, and none of their
 *   writes remain: each caller sees what a failed commit of its own would
 *   show. A BEGIN that fails (the lock not free within busyTimeoutMs)
 *   rejects every work that was to share the transaction.
 * - Works run one after another, never interleaved, in call order; a work
 *   sees the writes of those before it in its transaction. A shared
 *   transaction starts no work after MAX_SHARED_TRANSACTION_MS: the rest
 *   wait for the next one.
 * - `alone` works (application code, migrations) always have a
 *   transaction of their own.
 * - Works of different databases (a different kysely instance or
 *   engine) never share a transaction.
 */
import { sql } from "kysely";
import type { AnyDb } from "../kysely/engine.ts";

/** How many works one transaction takes at most: enough for a process's burst, short enough not to hold the file's lock long. */
export const MAX_WORKS_PER_TRANSACTION = 64;

/**
 * A shared transaction starts no further work once it has held the lock this
 * long (ms): the works left go back to the head of the queue, for the next
 * transaction. So a process with many large writes queued (batches of 1,000
 * jobs take ~30 ms each) still lets other processes' writes in between, as
 * it did before its writes shared transactions.
 */
export const MAX_SHARED_TRANSACTION_MS = 20;

/** Opens the write transaction on `conn` (`BEGIN IMMEDIATE` with the engine's wait for the lock). */
export type Begin = (conn: AnyDb) => Promise<void>;

interface Entry {
  db: AnyDb;
  begin: Begin;
  alone: boolean;
  work: (db: AnyDb) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

export class WriteBatches {
  #waiting: Entry[] = [];
  #running = false;

  run<T>(db: AnyDb, begin: Begin, work: (db: AnyDb) => Promise<T>, alone = false): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#waiting.push({ db, begin, alone, work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.#running) void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    this.#running = true;
    try {
      while (this.#waiting.length > 0) this.#waiting.unshift(...(await transact(this.#take())));
    } finally {
      this.#running = false;
    }
  }

  /** The next transaction's works: the head, and those after it that may share its transaction. */
  #take(): Entry[] {
    const head = this.#waiting[0]!;
    let n = 1;
    if (!head.alone) {
      while (n < this.#waiting.length && n < MAX_WORKS_PER_TRANSACTION) {
        const next = this.#waiting[n]!;
        if (next.alone || next.db !== head.db || next.begin !== head.begin) break;
        n++;
      }
    }
    return this.#waiting.splice(0, n);
  }
}

/**
 * Runs `entries`, or the first of them (see MAX_SHARED_TRANSACTION_MS), in
 * one transaction and settles each it ran; returns those it did not run, in
 * order. A transaction that fails to begin rejects them all; one lost after
 * it began rejects the works it ran (at least the first). Never throws.
 */
async function transact(entries: Entry[]): Promise<Entry[]> {
  const { db, begin } = entries[0]!;
  const progress = { began: false, ran: 0 };
  let outcomes: Outcome[];
  try {
    outcomes = await db.connection().execute(async (conn) => {
      await begin(conn);
      progress.began = true;
      try {
        const settled = entries.length === 1 ? [await attempt(entries[0]!, conn, progress)] : await inSavepoints(entries, conn, progress);
        // Nothing to keep when no work succeeded (a lone work that failed has no savepoint: this undoes its writes).
        if (settled.some((o) => o.ok)) await sql`commit`.execute(conn);
        else await sql`rollback`.execute(conn).catch(() => undefined);
        return settled;
      } catch (error) {
        await sql`rollback`.execute(conn).catch(() => undefined);
        throw error;
      }
    });
  } catch (error) {
    // Begun: the works it ran, and at least the next one (a savepoint that cannot be opened fails its work, rather than the queue retrying it forever).
    const failed = progress.began ? Math.max(progress.ran, 1) : entries.length;
    for (const e of entries.slice(0, failed)) e.reject(error);
    return entries.slice(failed);
  }
  outcomes.forEach((o, i) => (o.ok ? entries[i]!.resolve(o.value) : entries[i]!.reject(o.error)));
  return entries.slice(outcomes.length);
}

async function attempt(entry: Entry, conn: AnyDb, progress: { ran: number }): Promise<Outcome> {
  progress.ran++;
  try {
    return { ok: true, value: await entry.work(conn) };
  } catch (error) {
    return { ok: false, error };
  }
}

/**
 * Each work in a savepoint of the open transaction, in order, until
 * MAX_SHARED_TRANSACTION_MS have passed: the outcomes of those it ran (at
 * least one). Throws (so the whole transaction is rolled back and every
 * work it ran rejected) when a work's failure ended the transaction: its
 * savepoint is then gone.
 */
async function inSavepoints(entries: Entry[], conn: AnyDb, progress: { ran: number }): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  const began = Date.now();
  for (const [index, entry] of entries.entries()) {
    if (outcomes.length > 0 && Date.now() - began >= MAX_SHARED_TRANSACTION_MS) break;
    // A name of its own per work of the transaction: ROLLBACK TO and RELEASE of it also cover any savepoint the work
    // opened and left, where one name for all (which a work might open too) would reach only the work's innermost one.
    const savepoint = sql.raw(`docket_write_${index}`);
    await sql`savepoint ${savepoint}`.execute(conn);
    const outcome = await attempt(entry, conn, progress);
    if (!outcome.ok) {
      try {
        await sql`rollback to ${savepoint}`.execute(conn);
      } catch {
        throw outcome.error;
      }
    }
    await sql`release ${savepoint}`.execute(conn);
    outcomes.push(outcome);
  }
  return outcomes;
}
