import { Kysely, type Dialect, type KyselyPlugin, type RawBuilder } from "kysely";
import type { ReadyNotice, StoreHealth } from "../../core/adapter.ts";

// deno-lint-ignore no-explicit-any
export type AnyDb = Kysely<any>;

/** One schema version: statements applied in order, under the migration lock. */
export interface Migration {
  readonly version: number;
  readonly statements: readonly string[];
}

/** What a database engine can do; the shared modules branch on these, never on an engine's name. */
export interface Capabilities {
  /** `UPDATE/INSERT … RETURNING`. Without it a write is followed by a read-back in the same transaction. */
  readonly returning: boolean;
  /**
   * Row locks (`SELECT … FOR UPDATE`, and a shared lock, see `Engine.shareLock`):
   * key, control and outcome rows are locked before they are counted or written.
   * False is only correct for an engine with a single writer.
   */
  readonly rowLocks: boolean;
  /** `FOR UPDATE SKIP LOCKED`: claims, staging and purges pass over rows another transaction holds. */
  readonly skipLocked: boolean;
  /**
   * A `FOR UPDATE SKIP LOCKED` read locks only the rows it returns, however
   * it reaches them (PostgreSQL). MariaDB's InnoDB locks, for the length of
   * the read, rows it scans through an index that do not match, so another
   * transaction's locked read may skip rows that are free.
   */
  readonly exactSkipLocked: boolean;
  /** A claim as one statement, `WITH … UPDATE … WHERE id IN (SELECT … LIMIT n) RETURNING *`, atomic on its own. */
  readonly claimStatement: boolean;
  /** PostgreSQL arrays: `x = ANY(ARRAY(SELECT …))`, and array parameters (`$ids::bigint[]`, `unnest(…)`); otherwise `x IN (SELECT …)` and lists. */
  readonly arrays: boolean;
  /** `INSERT … ON CONFLICT (…) DO UPDATE`; false means `INSERT … ON DUPLICATE KEY UPDATE`. */
  readonly onConflict: boolean;
  /**
   * How an index scan is started at a position: "row", a row value
   * `(a, b, c) >= (x, y, z)` with the index on (…, a, b, c) begins there
   * rather than filtering from the start (PostgreSQL); "terms", only the
   * same bound written out, `a > x OR (a = x AND b > y) OR (a = x AND b = y
   * AND c >= z)` (MariaDB 10.11 reads the row value as a filter over the
   * whole range); false, neither is used. Claims use it to start past
   * entries an old snapshot keeps (claim-floor.ts).
   */
  readonly indexedRowBound: "row" | "terms" | false;
  /**
   * The claim floor tells a slow head by a locking read (FOR UPDATE SKIP
   * LOCKED, in a transaction that only reads): on MariaDB, under a held
   * snapshot, claims' locking reads of the head took hundreds of ms while an
   * unlocked read of it stayed under 5 ms (bench/results/session49.txt, run
   * P3), so an unlocked read would keep turning the floor off.
   */
  readonly floorReadsLocked: boolean;
  /** Statements run on the calling thread (an embedded database): see `DocketAdapter.blocking`. */
  readonly blocking: boolean;
}

/**
 * A database engine as a value: what it supports, how it runs a unit of
 * work, how it serializes migrations, how it reads its own errors. Every
 * function takes the kysely instance it works on; an engine holds no job
 * policy (that is the shared modules' and the core's).
 */
export interface Engine {
  readonly name: string;
  readonly capabilities: Capabilities;
  /** Runs `fn` in ONE write transaction: all of its writes commit or none does. */
  writeTransaction<T>(db: AnyDb, fn: (db: AnyDb) => Promise<T>): Promise<T>;
  /**
   * Runs a write that is one statement (several when the engine lacks
   * RETURNING). An engine whose single statement is atomic on its own may
   * skip BEGIN/COMMIT; otherwise this is `writeTransaction`.
   */
  writeStatement<T>(db: AnyDb, fn: (db: AnyDb) => Promise<T>): Promise<T>;
  /**
   * Runs `fn` in ONE write transaction, once: unlike `writeTransaction`, a
   * transaction the database aborts (a deadlock victim) is not run again,
   * because `fn` runs application code (`completeInTransaction`).
   */
  transactionOnce<T>(db: AnyDb, fn: (db: AnyDb) => Promise<T>): Promise<T>;
  /**
   * Runs `fn`, which only reads, so that all of its reads see one snapshot
   * of the database (a repeatable-read, read-only transaction; SQLite's
   * deferred one). Optional: absent, `fn` runs on `db` as is.
   */
  snapshotRead?<T>(db: AnyDb, fn: (db: AnyDb) => Promise<T>): Promise<T>;
  /** Runs `fn` while holding a lock that serializes migrations across processes. */
  withMigrationLock<T>(db: AnyDb, fn: (db: AnyDb) => Promise<T>): Promise<T>;
  /** The schema versions, oldest first; the same numbers in every engine. */
  migrations(): readonly Migration[];
  /** The table an error says does not exist, or null when it says something else. */
  missingTable(error: unknown): string | null;
  /** Whether an error is a unique-index violation (a duplicate key). */
  isUniqueViolation(error: unknown): boolean;
  /**
   * The jobs row's new `errors` value after a failed attempt, as an
   * expression for an UPDATE's SET: the stored JSON array (NULL as empty)
   * with `{attempt, at, error, worker}` appended, `attempt` and `worker`
   * read from the row being updated; when the array already holds `keep`
   * entries, its oldest is dropped. Assumes the SET does not change
   * `attempt` or `worker` (an engine may evaluate SETs left to right).
   */
  appendAttemptError(entry: { at: number; error: string }, keep: number): RawBuilder<string>;
  /**
   * A WHERE condition: `column` contains `text`, every character of it
   * literal, case-sensitively (NULL never does). Optional: absent, `column
   * LIKE pattern ESCAPE '!'` (see reads.ts), case-sensitive where the
   * column's collation is (PostgreSQL's default; utf8mb4_bin on MariaDB).
   */
  containsText?(column: string, text: string): RawBuilder<boolean>;
  /** Adds a shared row lock to a SELECT (a writer waits for it, other shared lockers do not). Only used with `rowLocks`. */
  shareLock<Q>(query: Q): Q;
  /**
   * The jobs table (`table`, unaliased) as a FROM item that makes the
   * planner read it through `index`: "claim", the index a claim read bounded
   * at a position ranges over (claim-floor.ts; with `readyQueueColumn`, the
   * index that column leads, and the read must name it: `onReadyIndex`), or
   * the primary key (the same read's rows locked by id). For an engine whose planner, under an old snapshot,
   * chose otherwise: MariaDB 10.11, with 90,000 claimed jobs' entries kept,
   * planned a floored read as a ref on (state, queue) with the bound as a
   * filter (270,489 pages, 62 ms for 100 jobs, locked) over a range
   * starting at it (304 pages, 1–3 ms; bench/results/session50.txt).
   * Optional: absent, the table itself.
   */
  forcedIndex?(table: string, index: "claim" | "primary"): RawBuilder<unknown>;
  /**
   * A column of the jobs table equal to `queue` while the job is ready and
   * NULL otherwise, leading the index `forcedIndex(table, "claim")` names,
   * `(column, priority, run_at, id)`: a floored read adds `column IN
   * (queues)` and ranges over that index. Where the engine's scan of a
   * range that holds fewer rows than its LIMIT goes on past the range's end
   * through entries an old snapshot keeps (InnoDB skips delete-marked
   * entries without checking the range's end), the claim index `(state,
   * queue, …)` put every 'running' entry since the snapshot after a queue's
   * ready ones (pages per read grew without bound: bench/results/
   * session52.txt); this index puts only the queue's other priorities and
   * then the next queue's ready entries there. Optional: absent, the claim
   * index, read by state and queue.
   */
  readyQueueColumn?: string;
  /**
   * How far the engine's purge of old row versions is behind (InnoDB's
   * history list length), or null when it cannot be read (MariaDB needs the
   * PROCESS privilege). Where present, the claim floor turns on only when
   * it is at least FLOOR_BACKLOG (claim-floor.ts): on MariaDB a locked read
   * of the head is slow under lock contention too (53 ms in a drain of
   * 10,000 jobs with no snapshot held), and a floor turned on there cost
   * the drain 0.78× (bench/results/session50.txt). Optional.
   */
  horizonBacklog?(db: AnyDb): Promise<number | null>;
  /**
   * Without RETURNING: the id step between the rows of one multi-row INSERT
   * when the engine gives them consecutive ids (first = the statement's
   * insert id), or null to insert one row per statement.
   */
  consecutiveInsertIds(db: AnyDb): Promise<number | null>;
  /**
   * Without `capabilities.returning`: whether `INSERT … RETURNING` works all
   * the same (MariaDB 10.5 and later have it for INSERT, not for UPDATE):
   * a batch is then inserted by one multi-row statement per chunk that
   * returns its rows, whatever the engine's id allocation. Read once per
   * engine. Optional: absent, no.
   */
  insertReturning?(db: AnyDb): Promise<boolean>;
  /**
   * For an engine whose driver sends parameters inlined as escaped literals:
   * the largest statement, in bytes, the server accepts (it refuses a longer
   * one, and may close the connection). Read once. Optional: without it a
   * statement's size is not limited. Multi-row INSERTs are split to fit, and
   * the store reports the payload limit one row can carry
   * (DocketAdapter.payloadLimit; see statement-size.ts).
   */
  maxStatementBytes?(db: AnyDb): Promise<number>;
  /**
   * Tells other processes' workers that jobs became ready (or due) in these
   * queues (a null queue: any queue, e.g. a task's control changed), inside
   * the caller's transaction (delivered on commit). An engine without
   * notifications does nothing.
   */
  announceReady(db: AnyDb, notices: readonly { queue: string | null; due: boolean }[]): Promise<void>;
  /**
   * The window of the ready notices a store sends for its own autocommit
   * writes (notice-window.ts), ms: where a notice is costly to the
   * database (PostgreSQL serializes the commits that NOTIFY), a burst of
   * enqueues sends one notice of a kind per window, each write's at most
   * this long after its commit. Optional: 0, every write announces its own.
   */
  noticeWindowMs?: number;
  /**
   * Notices that ride on a statement of their own: `expression(payload)`,
   * selected once by an autocommit statement, announces the notice that
   * `payload(notice)` encodes when that statement commits (so another
   * process hears of a job in the same round trip that stores it).
   * `payload` may be a compiled statement's Slot. Optional: an engine
   * without it is sent `announceReady` after the write.
   */
  statementNotice?: {
    payload(notice: { queue: string; due: boolean }): string;
    expression(payload: unknown): RawBuilder<unknown>;
  };
  /**
   * A kysely instance that runs its statements on `client`, a driver-level
   * connection the caller holds inside BEGIN (e.g. a `pg` client); null
   * when `client` is not one this engine can use; `{ refused }` (why) when
   * it is this driver's but no open transaction: a pool, a client before
   * BEGIN or after COMMIT, or one whose transaction failed. Sends nothing
   * that writes. Optional.
   */
  adoptClient?(client: object): Promise<AnyDb | { refused: string } | null>;
  /**
   * Runs `fn` in ONE transaction on `client`, a driver-level connection the
   * caller holds and left idle (e.g. a `pg` Client or PoolClient): sends
   * BEGIN, hands `fn` a kysely instance on that connection, then COMMIT, or
   * ROLLBACK when `fn` throws (its error is rethrown). Never runs `fn` twice.
   * Throws InvalidArgumentError, before BEGIN, for what it cannot use: not
   * a client, a pool, a client with a transaction already open. The caller
   * keeps the client. Optional (the `{ client }` form of `ctx.transaction`).
   */
  transactionOnClient?<T>(client: object, fn: (db: AnyDb) => Promise<T>): Promise<T>;
  /**
   * Told each statement text the store compiled once and will run again and
   * again with new parameters, so the engine may have the server parse and
   * plan it once per connection. Only texts whose best plan does not depend
   * on how many jobs are stored are told (inserts, reads of control rows):
   * a claim or an outcome that finds jobs by a predicate runs planned for
   * the table as it is, since a plan made once while the table was nearly
   * empty (a fresh or drained store) scanned every job at each run after a
   * burst, until the table was next analyzed (see `PLANNED_EACH_RUN`).
   * Optional; must not change what the statement does.
   */
  prepare?(sql: string): void;
  /**
   * The jobs column that holds a job's debounce key only while the job is
   * pending (a generated column, where the schema has no partial indexes),
   * which the unique index of pending debounce keys covers; a debounce
   * lookup matches on it. Optional: absent, the lookup matches `debounce_key`
   * and the pending states, which a partial index covers.
   */
  readonly debouncePendingColumn?: string;
  /**
   * An expression that, in the RETURNING of an `INSERT … ON CONFLICT … DO
   * UPDATE`, is true for the row the statement inserted and false for the
   * row it updated (PostgreSQL: `xmax = 0`). Optional: with it, a debounced
   * enqueue merges or inserts in that one statement (debounce.ts
   * `upsertDebounced`); without it, in a transaction (`mergeOrInsert`).
   */
  readonly insertedFlag?: RawBuilder<boolean>;
  /**
   * Whether a debounced enqueue may merge or insert in one `INSERT … ON
   * DUPLICATE KEY UPDATE … RETURNING` (debounce.ts `upsertOnDuplicate`):
   * the engine has that statement with RETURNING, and the only unique index
   * a job without an idempotency key can meet is the one of pending debounce
   * keys (MariaDB 10.5+, migration 21's `debounce_slot`). Read once.
   * Optional: absent, no.
   */
  duplicateKeyUpsert?(db: AnyDb): Promise<boolean>;
  /**
   * Runs `fn`, ONE autocommit statement that has no effect when it fails,
   * again (as `writeTransaction` runs a transaction again) when the engine
   * reports a lost race: MariaDB's deadlock or lock wait timeout, which an
   * upsert of a row that concurrent statements also upsert can meet.
   * Optional: absent, `fn` runs once.
   */
  retriedStatement?<T>(db: AnyDb, fn: (db: AnyDb) => Promise<T>): Promise<T>;
  /**
   * True where a row lock guards only on the server that holds it (MariaDB
   * Galera Cluster certifies a commit against the rows other servers'
   * transactions wrote, never the rows they locked). Then a transaction that
   * relies on the lock of a control, key or parent row also writes that row
   * (see guard-writes.ts), so two that rely on the same row on different
   * servers cannot both commit. Known once a transaction of the engine has
   * begun. Optional: absent, false.
   */
  locksAreLocal?(): boolean;
  /** Reads what the engine must know of its server (e.g. `locksAreLocal`) before a caller's transaction is written to; once. Optional. */
  knowServer?(db: AnyDb): Promise<void> | void;
  /** Subscribes to other processes' notices, where the engine has them; see DocketAdapter.onReady. */
  onReady?(listener: (notice: ReadyNotice) => void): () => void;
  /** See DocketAdapter.health: `tables` are the store's table names. Optional. */
  health?(db: AnyDb, tables: readonly string[]): Promise<StoreHealth>;
  /** Closes what the engine opened beyond the kysely instance. */
  close(): Promise<void>;
}

/** Defaults for an engine's optional behaviour: a standard `FOR SHARE`, no consecutive ids, no notices, nothing to close. */
export const ENGINE_DEFAULTS = {
  transactionOnce: <T>(db: AnyDb, fn: (db: AnyDb) => Promise<T>): Promise<T> => db.transaction().execute(fn),
  // deno-lint-ignore no-explicit-any
  shareLock: <Q>(query: Q): Q => (query as any).forShare(),
  consecutiveInsertIds: async (): Promise<number | null> => null,
  announceReady: async (): Promise<void> => undefined,
  close: async (): Promise<void> => undefined,
} satisfies Partial<Engine>;

/**
 * An instrumentation seam shared by every adapter: wrap the kysely dialect
 * (tracing, or docket/testing's scheduled dialect that interleaves
 * statements), add kysely plugins, wrap the engine. Default: none. It never
 * changes what the adapter guarantees unless a plugin rewrites queries or a
 * wrapper changes the engine, which only docket/testing's mutations do, on purpose.
 */
/** The claim floor's thresholds (claim-floor.ts; tests lower them through InstrumentOptions.claimFloor). */
export interface FloorTuning {
  /** Claims from the head that take this long (ms), `slowClaims` in a row, turn the floor on. */
  slowMs: number;
  slowClaims: number;
  /** After them, a read of the head must take at least this long (ms) to turn the floor on; 0: on at once, no read. */
  confirmMs: number;
  /** A check of the head that finds nothing below the floor, faster than this (ms), turns it off (below `slowMs`: a head read between the two keeps it on). */
  offMs: number;
  /** How far (ms of run time) the floor stays behind the first job of the last claim. */
  lagMs: number;
  /** The least time between two checks of the head. */
  checkMs: number;
  /** A check that took d ms waits at least this × d before the next. */
  checkFactor: number;
  /** Told when a floor turns on, is lowered by a check, or turns off (benchmarks and tests; must not throw). */
  observe?: (event: FloorEvent) => void;
}

/** A change of a claim floor: the claim's queue, what happened, the floor after it (null: off), and the check's duration if a check did it. */
export interface FloorEvent {
  queue: string;
  change: "on" | "lowered" | "off";
  floor: { priority: number; runAt: number; id: number } | null;
  checkMs?: number;
}

export interface InstrumentOptions {
  wrapDialect?: (dialect: Dialect) => Dialect;
  /** The claim floor's thresholds (claim-floor.ts), for tests. */
  claimFloor?: Partial<FloorTuning>;
  plugins?: KyselyPlugin[];
  wrapEngine?: (engine: Engine) => Engine;
}

/** A kysely instance for `dialect`, with the instrumentation applied. */
export function createKysely(dialect: Dialect, instrument: InstrumentOptions | undefined): AnyDb {
  return new Kysely({
    dialect: instrument?.wrapDialect ? instrument.wrapDialect(dialect) : dialect,
    plugins: instrument?.plugins ?? [],
  });
}
