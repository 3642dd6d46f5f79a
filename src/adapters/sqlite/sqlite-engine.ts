import { sql } from "kysely";
import { ENGINE_DEFAULTS, type AnyDb, type Engine } from "../kysely/engine.ts";
import { WriteBatches } from "./write-batches.ts";
import { migrations } from "./migrations.ts";
import type { CommitWatch } from "./commit-watch.ts";

/**
 * Every SQLite write transaction in this process goes through this queue
 * before `BEGIN IMMEDIATE`, and those that queue together share one
 * transaction (see WriteBatches for what each caller is guaranteed).
 */
const processWriters = new WriteBatches();

/**
 * The longest pause between two tries of a write lock another connection
 * holds. SQLite's lock is no queue (the first to try once it is free gets
 * it), so a longer pause loses more turns to a process writing back to
 * back: behind a producer of 1,000-job batches, small enqueues waited 470 ms
 * at p99 with 16 ms, 249 ms with 4 (docs/databases.md, "SQLite writes").
 */
const BUSY_PAUSE_MAX_MS = 4;

/** SQLITE_BUSY: another connection holds the lock (better-sqlite3's code; node:sqlite's message). */
function isBusy(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | undefined;
  return e?.code === "SQLITE_BUSY" || /database is locked/i.test(String(e?.message));
}

/**
 * SQLite: a single writer per database file. It needs no row locks because
 * every write is a `BEGIN IMMEDIATE` transaction, serialized against all
 * others: in this process by `processWriters`, across processes by SQLite's
 * lock. `RETURNING` (3.35+) makes a guarded write one statement.
 */
export function sqliteEngine(options: { prefix: string; busyTimeoutMs?: number; inOutsideTransaction?: () => boolean; commits?: CommitWatch }): Engine {
  const { prefix } = options;
  const busy = options.busyTimeoutMs ?? 5000;
  const outside = options.inOutsideTransaction ?? (() => false);
  /** Resolves once the application's own transaction on a shared handle (if any) has ended, polling every 2 ms. */
  const outsideEnded = async (): Promise<void> => {
    while (outside()) await new Promise((resolve) => setTimeout(resolve, 2));
  };
  /** The application shares the handle (SqliteAdapterOptions.database): its own statements must keep `busy` while this waits. */
  const shared = options.inOutsideTransaction !== undefined;
  /**
   * `BEGIN IMMEDIATE` without the driver's busy handler, which would sleep on
   * this thread while another connection (another process, or another
   * handle in this one) holds the write lock: SQLITE_BUSY is retried after a
   * timer instead, so the event loop runs while this process waits. Gives up
   * with SQLite's own error once `busy` ms have passed, as the handler would.
   * The connection's busy timeout is 0 only while this waits (on a handle
   * the application shares, only for each BEGIN itself, so its statements
   * keep `busy` between tries), and before each try the application's own
   * transaction on a shared handle has ended.
   */
  const beginImmediate = async (conn: AnyDb): Promise<void> => {
    const deadline = Date.now() + busy;
    for (let pause = 1, first = true; ; pause = Math.min(pause * 2, BUSY_PAUSE_MAX_MS), first = false) {
      await outsideEnded();
      if (shared || first) await sql.raw("pragma busy_timeout = 0").execute(conn);
      let failure: unknown = null;
      try {
        await sql`begin immediate`.execute(conn);
      } catch (error) {
        failure = error;
      }
      const last = failure === null || !isBusy(failure) || Date.now() >= deadline;
      if (shared || last) {
        try {
          await sql.raw(`pragma busy_timeout = ${busy}`).execute(conn);
        } catch (error) {
          if (failure === null) await sql`rollback`.execute(conn).catch(() => undefined);
          throw error;
        }
      }
      if (failure === null) return;
      if (last) throw failure;
      await new Promise((resolve) => setTimeout(resolve, Math.min(pause, Math.max(1, deadline - Date.now()))));
    }
  };
  const writeTransaction = <T>(db: AnyDb, fn: (db: AnyDb) => Promise<T>): Promise<T> => processWriters.run(db, beginImmediate, fn);
  /**
   * `fn`'s reads in one deferred transaction: its first read fixes the
   * snapshot (WAL), and other connections' commits after it are not seen.
   * It holds the process's one connection for the call. On a handle the
   * application shares, it begins only once the application's own
   * transaction has ended (as `beginImmediate`); one the application opens
   * while it runs nests in it, as it would in a docket write.
   */
  const snapshotRead = <T>(db: AnyDb, fn: (db: AnyDb) => Promise<T>): Promise<T> =>
    db.connection().execute(async (conn) => {
      await outsideEnded();
      await sql`begin`.execute(conn);
      try {
        const result = await fn(conn);
        await sql`commit`.execute(conn);
        return result;
      } catch (error) {
        await sql`rollback`.execute(conn).catch(() => undefined);
        throw error;
      }
    });
  /** A transaction of its own: application code (`completeInTransaction`) and migrations never share one. */
  const transactionAlone = <T>(db: AnyDb, fn: (db: AnyDb) => Promise<T>): Promise<T> => processWriters.run(db, beginImmediate, fn, true);
  return {
    ...ENGINE_DEFAULTS,
    name: "sqlite",
    capabilities: { returning: true, rowLocks: false, skipLocked: false, exactSkipLocked: false, claimStatement: true, arrays: false, onConflict: true, indexedRowBound: false, floorReadsLocked: false, blocking: true },
    writeTransaction,
    writeStatement: writeTransaction,
    snapshotRead,
    transactionOnce: transactionAlone,
    withMigrationLock: transactionAlone,
    migrations: () => migrations(prefix),
    // SQLITE_ERROR "no such table: x" (better-sqlite3 and node:sqlite alike).
    missingTable(error) {
      const match = /no such table: (\S+)/.exec(String((error as Error | undefined)?.message));
      return match ? match[1]! : null;
    },
    appendAttemptError: ({ at, error }, keep) => {
      const stored = sql`coalesce(errors, '[]')`;
      return sql<string>`json_insert(case when json_array_length(${stored}) >= ${keep} then json_remove(${stored}, '$[0]') else ${stored} end, '$[#]', json_object('attempt', attempt, 'at', ${at}, 'error', ${error}, 'worker', worker))`;
    },
    // SQLite's LIKE ignores the case of ASCII letters; instr compares exactly, and has no wildcards.
    containsText: (column, text) => sql<boolean>`instr(${sql.ref(column)}, ${text}) > 0`,
    // Other connections' commits, seen by polling the file's data version (SQLite has no NOTIFY).
    ...(options.commits ? { onReady: (listener) => options.commits!.subscribe(listener), close: async () => options.commits!.close() } : {}),
    // SQLITE_CONSTRAINT_UNIQUE "UNIQUE constraint failed: …" (better-sqlite3 and node:sqlite alike).
    isUniqueViolation: (error) => /UNIQUE constraint failed/.test(String((error as Error | undefined)?.message)),
  };
}
