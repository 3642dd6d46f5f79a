import { sql } from "kysely";
import { AdapterError } from "../../core/errors.ts";
import type { ReadyNotice } from "../../core/adapter.ts";
import { ENGINE_DEFAULTS, type AnyDb, type Engine } from "../kysely/engine.ts";
import { migrations } from "./migrations.ts";
import type { Wakes } from "./wakes.ts";
import { withLockRow } from "./migration-lock.ts";

/**
 * errno of InnoDB's deadlock victim and of a lock wait timeout: the
 * transaction rolled back and may be retried. On Galera, 1213 is also a
 * commit that lost certification to another server's (a lost race), and
 * 1047 a server not (yet, or no longer) synced with the cluster.
 */
const RETRYABLE_ERRNOS = new Set([1213, 1205]);
const GALERA_RETRYABLE_ERRNOS = new Set([1213, 1205, 1047]);
const MAX_TRANSACTION_TRIES = 5;
/** On Galera, claims on different servers pick the same rows (SKIP LOCKED sees only local locks) and lose certification often: more tries, apart. */
const GALERA_TRANSACTION_TRIES = 40;
const GALERA_BACKOFF_MS = 40;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * MySQL 8 / MariaDB 10.6+. There is no `UPDATE … RETURNING` (and MySQL 8
 * has no `INSERT … RETURNING`), so a guarded write is UPDATE then SELECT in
 * one transaction, and a claim is `SELECT … FOR UPDATE SKIP LOCKED` then
 * UPDATE (MariaDB rejects `UPDATE … WHERE id IN (SELECT … LIMIT n)`).
 * Transactions run at READ COMMITTED, which takes no gap locks and lets each
 * statement see what committed before it (set per session on docket's own
 * pool, per transaction on a caller's), and are retried whole when InnoDB
 * picks them as a deadlock victim.
 *
 * On MariaDB Galera Cluster (`wsrep_on`, read before the engine's first
 * transaction) row locks are local to a server: `locksAreLocal()` is true,
 * so the shared modules write the rows they rely on (guard-writes.ts);
 * migrations are serialized by a lock row, not GET_LOCK (which is per
 * server); a lost certification is retried, with jittered backoff, up to
 * GALERA_TRANSACTION_TRIES times.
 */
export function mysqlEngine(options: { prefix: string; sessionReadCommitted?: boolean; wakes?: Wakes | null; galera?: (db: AnyDb) => Promise<boolean> }): Engine {
  const { prefix } = options;
  const wakes = options.wakes ?? null;
  // docket's own transactions (writeTransaction), and those of them that announced: their wake is bumped after COMMIT.
  const own = new WeakSet<object>();
  const announced = new WeakSet<object>();
  // On docket's own pool every session is READ COMMITTED already: BEGIN alone, one round trip less per transaction.
  const begin = (db: AnyDb) => (options.sessionReadCommitted ? db.transaction() : db.transaction().setIsolationLevel("read committed"));
  const insertStep = readOnce((db) =>
    sql<{ mode: number | string; step: number | string }>`select @@innodb_autoinc_lock_mode as mode, @@auto_increment_increment as step`
      .execute(db)
      .then((r) => {
        const row = r.rows[0];
        return row && Number(row.mode) <= 1 ? Number(row.step) : null;
      }),
  );
  const returningInsert = readOnce((db) =>
    sql<{ v: string }>`select version() as v`.execute(db).then((r) => {
      const m = /^(\d+)\.(\d+)\..*mariadb/i.exec(String(r.rows[0]?.v ?? ""));
      return m !== null && (Number(m[1]) > 10 || (Number(m[1]) === 10 && Number(m[2]) >= 5));
    }),
  );
  const packet = readOnce((db) => sql<{ max: number | string }>`select @@max_allowed_packet as max`.execute(db).then((r) => Number(r.rows[0]?.max)));
  // Whether the server is a Galera node: null until read (once per engine, before its first transaction).
  let galera: boolean | null = null;
  // Read by the adapter off the pool, beside kysely (not one of the statements an operation sends); without it, here.
  const readGalera = options.galera ?? ((db: AnyDb) => sql<{ Value: string }>`show variables like 'wsrep_on'`.execute(db).then((r) => String(r.rows[0]?.Value ?? "OFF").toUpperCase() === "ON"));
  const galeraOnce = readOnce(readGalera);
  const knowCluster = (db: AnyDb): Promise<void> | void => (galera !== null ? undefined : galeraOnce(db).then((on) => void (galera = on)));
  /** `run` again while it fails with a lost race (deadlock, lock wait timeout; on Galera also a certification failure), up to the tries. */
  const retried = async <T>(run: () => Promise<T>): Promise<T> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await run();
      } catch (error) {
        const errno = (error as { errno?: unknown }).errno;
        const [tries, retryable] = galera ? [GALERA_TRANSACTION_TRIES, GALERA_RETRYABLE_ERRNOS] : [MAX_TRANSACTION_TRIES, RETRYABLE_ERRNOS];
        if (attempt >= tries || typeof errno !== "number" || !retryable.has(errno)) throw error;
        if (galera) await sleep(Math.random() * Math.min(GALERA_BACKOFF_MS, 2 ** attempt));
      }
    }
  };
  const writeTransaction = async <T>(db: AnyDb, fn: (db: AnyDb) => Promise<T>): Promise<T> => {
    await knowCluster(db);
    return retried(async () => {
      let trx: object | null = null;
      const result = await begin(db).execute((t) => {
        trx = t;
        own.add(t);
        return fn(t);
      });
      // Not awaited: the caller's write has committed; the wake follows in the background.
      if (trx !== null && announced.has(trx)) void wakes?.bump();
      return result;
    });
  };
  /** `read`'s value, or null when the server refused it for want of the PROCESS privilege (errno 1227, ER_SPECIFIC_ACCESS_DENIED_ERROR). */
  const withoutProcess = <T>(read: Promise<T>): Promise<T | null> =>
    read.catch((error: unknown) => {
      if ((error as { errno?: unknown })?.errno === 1227) return null;
      throw error;
    });
  // The undo history InnoDB has not purged (needs PROCESS): it grows while an old snapshot stays open.
  const historyLength = async (db: AnyDb): Promise<number | null> => {
    const history = await sql<{ n: string | number }>`select count as n from information_schema.innodb_metrics where name = 'trx_rseg_history_len'`.execute(db);
    const n = history.rows[0]?.n;
    return n === undefined ? null : Number(n);
  };
  return {
    ...ENGINE_DEFAULTS,
    name: "mysql",
    capabilities: { returning: false, rowLocks: true, skipLocked: true, exactSkipLocked: false, claimStatement: false, arrays: false, onConflict: false, indexedRowBound: "terms", floorReadsLocked: true, blocking: false },
    snapshotRead: (db, fn) => db.transaction().setIsolationLevel("repeatable read").setAccessMode("read only").execute(fn),
    writeTransaction,
    writeStatement: writeTransaction,
    retriedStatement: (db, fn) => retried(() => fn(db)),
    transactionOnce: async (db, fn) => {
      await knowCluster(db);
      return begin(db).execute(fn);
    },
    locksAreLocal: () => galera === true,
    knowServer: knowCluster,
    // Migration 14: the generated column behind the unique index of pending debounce keys.
    debouncePendingColumn: "debounce_pending",
    /** DDL is not transactional here: a named lock (GET_LOCK) held on one connection serializes migrations; on Galera, a lock row (migration-lock.ts). */
    withMigrationLock: async (db, fn) => {
      await knowCluster(db);
      if (galera) return withLockRow(db, `${prefix}migration_lock`, fn);
      const name = `docket:migrate:${prefix}`;
      return db.connection().execute(async (conn) => {
        const got = await sql<{ locked: number | null }>`select get_lock(${name}, 60) as locked`.execute(conn);
        if (Number(got.rows[0]?.locked) !== 1) throw new AdapterError(`mysql: could not take the migration lock ${name} within 60 s`);
        try {
          return await fn(conn);
        } finally {
          await sql`select release_lock(${name})`.execute(conn);
        }
      });
    },
    migrations: () => migrations(prefix),
    horizonBacklog: (db: AnyDb) => historyLength(db).catch(() => null),
    // InnoDB's horizon: the oldest open transaction (INNODB_TRX; needs PROCESS to see other sessions') and the undo
    // history not yet purged, which grows while it stays open. InnoDB keeps no per-table count of dead versions.
    // Both reads need PROCESS: a role without it (databases.md's least-privilege roles) gets null for each.
    async health(db: AnyDb) {
      const oldest = await withoutProcess(
        sql<{ ms: string | number | null }>`select timestampdiff(microsecond, min(trx_started), now(6)) div 1000 as ms
        from information_schema.innodb_trx where trx_mysql_thread_id <> connection_id()`.execute(db),
      );
      const backlog = await withoutProcess(historyLength(db));
      const ms = oldest === null ? null : oldest.rows[0]?.ms;
      return {
        oldestTransactionAgeMs: oldest === null ? null : ms === null || ms === undefined ? 0 : Math.max(0, Number(ms)),
        deadRows: null,
        purgeBacklog: backlog,
        autovacuum: null,
      };
    },
    ...(wakes
      ? {
          // A wake (see wakes.ts): after COMMIT for docket's own writes, inside a caller's transaction otherwise.
          async announceReady(db: AnyDb, notices: readonly { queue: string | null; due: boolean }[]) {
            if (notices.length === 0) return;
            if (!db.isTransaction) return wakes.bump();
            if (own.has(db)) return void announced.add(db);
            await wakes.inTransaction(db);
          },
          onReady: (listener: (notice: ReadyNotice) => void) => wakes.subscribe(listener),
          close: async () => wakes.close(),
        }
      : {}),
    // errno 1146 ER_NO_SUCH_TABLE: Table 'db.x' doesn't exist.
    missingTable(error) {
      if ((error as { errno?: unknown })?.errno !== 1146) return null;
      return /Table '(?:[^'.]+\.)?([^']+)'/.exec(String((error as Error).message))?.[1] ?? `${prefix}jobs`;
    },
    appendAttemptError: ({ at, error }, keep) => {
      const stored = sql`coalesce(errors, '[]')`;
      return sql<string>`json_array_append(case when json_length(${stored}) >= ${keep} then json_remove(${stored}, '$[0]') else ${stored} end, '$', json_object('attempt', attempt, 'at', ${at}, 'error', ${error}, 'worker', worker))`;
    },
    // errno 1062 ER_DUP_ENTRY.
    isUniqueViolation: (error) => (error as { errno?: unknown })?.errno === 1062,
    // MariaDB spells a shared row lock `LOCK IN SHARE MODE` (it has no `FOR SHARE`).
    // deno-lint-ignore no-explicit-any
    shareLock: <Q>(query: Q): Q => (query as any).modifyEnd(sql`lock in share mode`),
    // The floored reads' index is migration 25's ready index (readyQueueColumn).
    forcedIndex: (table: string, index: "claim" | "primary") => sql`${sql.table(table)} force index (${index === "claim" ? sql.id(`${table}_ready`) : sql.raw("primary")})`,
    readyQueueColumn: "ready_queue",
    /**
     * InnoDB gives the rows of one multi-row ("simple") INSERT consecutive
     * ids, `auto_increment_increment` apart, in lock modes 0 and 1 (MariaDB's
     * default is 1); mode 2 may interleave them with concurrent inserts, so
     * then each row is inserted on its own. Read once per engine.
     */
    consecutiveInsertIds: insertStep,
    /** MariaDB 10.5 and later (`version()` names MariaDB): INSERT … RETURNING. MySQL has none. Read once per engine. */
    insertReturning: returningInsert,
    // RETURNING (MariaDB 10.5+) and migration 21's one-column unique index of pending debounce keys.
    duplicateKeyUpsert: returningInsert,
    /** mysql2 inlines parameters: a statement is one packet, at most `max_allowed_packet` bytes (read once per engine). */
    maxStatementBytes: packet,
  };
}

/**
 * `read`'s answer, read on the first call and kept for every later one; a
 * read that fails is tried again on the next call. Callers on the pool
 * share a read in flight; a caller in a transaction reads on its own
 * connection, never waiting for one that went to the pool.
 */
function readOnce<T>(read: (db: AnyDb) => Promise<T>): (db: AnyDb) => Promise<T> {
  let answer: { value: T } | null = null;
  let pending: Promise<T> | null = null;
  const keep = (value: T): T => ((answer = { value }), value);
  return (db) => {
    if (answer !== null) return Promise.resolve(answer.value);
    // In a transaction, on its own connection: a read shared through the pool could wait for a connection that the
    // transactions awaiting it hold (a deadlock, once every connection is such a transaction's).
    if (db.isTransaction) return read(db).then(keep);
    return (pending ??= read(db).then(keep).finally(() => (pending = null)));
  };
}
