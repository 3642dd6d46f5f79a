import { Kysely, PostgresDialect, sql, type PostgresPool } from "kysely";
import type { ReadyNotice } from "../../core/adapter.ts";
import { InvalidArgumentError } from "../../core/errors.ts";
import { ENGINE_DEFAULTS, type AnyDb, type Engine } from "../kysely/engine.ts";
import { migrations } from "./migrations.ts";
import { readyPayload, type ReadyListener } from "./listener.ts";
import { isNamedStatementRefusal, type PreparedTexts } from "./prepared.ts";

/** The window of the store's own ready notices on PostgreSQL, ms (Engine.noticeWindowMs). */
export const NOTICE_WINDOW_MS = 10;

const MAX_TRANSACTION_TRIES = 5;

export interface PostgresEngineOptions {
  prefix: string;
  /** Subscriptions to other processes' notices (LISTEN on a dedicated connection). */
  listener: ReadyListener;
  /** Called by `close()` after the listener stopped (e.g. take docket's listeners off a caller's pool). */
  onClose?: () => void;
  /** Texts to run as named statements (see PreparedTexts); none when the adapter runs every statement unnamed. */
  prepared?: PreparedTexts | null;
}

/**
 * PostgreSQL: `UPDATE … RETURNING` makes every guarded write one statement,
 * run without BEGIN/COMMIT; claims are one statement that locks candidates
 * with `FOR UPDATE SKIP LOCKED`. Transactions run at READ COMMITTED, where a
 * guarded UPDATE re-checks its WHERE clause on the newest row version after
 * waiting for a lock, so a lost race matches zero rows. Ready jobs are
 * announced with NOTIFY on the `<prefix>ready` channel.
 */
export function postgresEngine(options: PostgresEngineOptions): Engine {
  const { prefix, listener } = options;
  const channel = `${prefix}ready`;
  // A transaction PostgreSQL picked as a deadlock victim rolled back whole: it is run again (e.g. two batches
  // inserting the same idempotency keys in opposite orders). So is one a refused named statement aborted
  // before it ran: the next attempt runs that statement unnamed.
  const writeTransaction = async <T>(db: AnyDb, fn: (db: AnyDb) => Promise<T>): Promise<T> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await db.transaction().execute(fn);
      } catch (error) {
        const again = (error as { code?: unknown })?.code === "40P01" || isNamedStatementRefusal(error);
        if (attempt >= MAX_TRANSACTION_TRIES || !again) throw error;
      }
    }
  };
  return {
    ...ENGINE_DEFAULTS,
    name: "postgres",
    capabilities: { returning: true, rowLocks: true, skipLocked: true, exactSkipLocked: true, claimStatement: true, arrays: true, onConflict: true, indexedRowBound: "row", floorReadsLocked: false, blocking: false },
    snapshotRead: (db, fn) => db.transaction().setIsolationLevel("repeatable read").setAccessMode("read only").execute(fn),
    writeTransaction,
    // A single `UPDATE … RETURNING` is atomic on its own: no BEGIN/COMMIT round trips.
    writeStatement: (db, fn) => fn(db),
    // DDL is transactional here: the advisory lock and the migration commit together.
    withMigrationLock: (db, fn) =>
      db.transaction().execute(async (trx) => {
        await sql`select pg_advisory_xact_lock(hashtext(${"docket:migrate:" + prefix}))`.execute(trx);
        return fn(trx);
      }),
    migrations: () => migrations(prefix),
    // SQLSTATE 42P01 undefined_table; the name is in the message: relation "x" does not exist.
    missingTable(error) {
      if ((error as { code?: unknown })?.code !== "42P01") return null;
      return /relation "([^"]+)"/.exec(String((error as Error).message))?.[1] ?? `${prefix}jobs`;
    },
    appendAttemptError: ({ at, error }, keep) => {
      const stored = sql`coalesce(errors::jsonb, '[]'::jsonb)`;
      return sql<string>`((case when jsonb_array_length(${stored}) >= ${keep} then ${stored} - 0 else ${stored} end) || jsonb_build_array(jsonb_build_object('attempt', attempt, 'at', ${at}::bigint, 'error', ${error}::text, 'worker', worker)))::text`;
    },
    // SQLSTATE 23505 unique_violation.
    isUniqueViolation: (error) => (error as { code?: unknown })?.code === "23505",
    // One NOTIFY per distinct notice, sent when the caller's transaction commits.
    async announceReady(db: AnyDb, notices: readonly { queue: string | null; due: boolean }[]) {
      if (notices.length === 0) return;
      const payloads = [...new Set(notices.map((n) => readyPayload(n.queue, n.due)))];
      await sql`select pg_notify(${channel}, p) from unnest(${payloads}::text[]) as p`.execute(db);
    },
    // Commits that NOTIFY are serialized (each holds the notification queue's lock across its flush): a burst of the
    // store's own enqueues sends one notice per queue per window, each job's at most this long after its commit.
    noticeWindowMs: NOTICE_WINDOW_MS,
    // A row an upsert inserted has no deleting transaction yet; the row it updated was locked by it (xmax set).
    insertedFlag: sql<boolean>`xmax = 0`,
    statementNotice: {
      payload: (notice) => readyPayload(notice.queue, notice.due),
      expression: (payload) => sql`pg_notify(${channel}, ${payload})`,
    },
    adoptClient: (client) => adoptPgClient(client),
    transactionOnClient,
    onReady: (l: (notice: ReadyNotice) => void) => listener.subscribe(l),
    // The horizon: the oldest transaction holding a snapshot or an xid (any database: a replication slot's or another
    // database's xmin holds it too), the dead row versions autovacuum has not yet removed from docket's tables, and
    // whether autovacuum runs for them at all.
    async health(db: AnyDb, tables: readonly string[]) {
      const oldest = await sql<{ ms: string | number | null }>`select (extract(epoch from (clock_timestamp() - min(xact_start))) * 1000)::bigint as ms
        from pg_stat_activity where pid <> pg_backend_pid() and (backend_xid is not null or backend_xmin is not null)`.execute(db);
      const rows = await sql<{ table: string; dead: string | number; live: string | number }>`select relname as "table", n_dead_tup as dead, n_live_tup as live
        from pg_stat_user_tables where schemaname = current_schema() and relname = any(${[...tables]}::text[]) order by relname`.execute(db);
      // Autovacuum for docket's tables: the server's switches, and any table's own autovacuum_enabled.
      const vacuum = await sql<{ on: boolean }>`select current_setting('autovacuum')::boolean and current_setting('track_counts')::boolean
        and not exists (select 1 from pg_class c where c.relnamespace = current_schema()::regnamespace and c.relname = any(${[...tables]}::text[])
          and 'autovacuum_enabled=false' = any(coalesce(c.reloptions, '{}'::text[]))) as "on"`.execute(db);
      const ms = oldest.rows[0]?.ms;
      return {
        oldestTransactionAgeMs: ms === null || ms === undefined ? 0 : Math.max(0, Number(ms)),
        deadRows: rows.rows.map((r) => ({ table: r.table, dead: Number(r.dead), live: Number(r.live) })),
        purgeBacklog: null,
        autovacuum: vacuum.rows[0]?.on === true,
      };
    },
    ...(options.prepared ? { prepare: (sql: string) => options.prepared!.register(sql) } : {}),
    async close() {
      await listener.close();
      options.onClose?.();
    },
  };
}

const adopted = new WeakMap<object, AnyDb>();

/** A pg-style queryable: a Client, PoolClient or Pool (or a compatible object). */
type Queryable = { query(text: string): Promise<unknown>; getTransactionStatus?(): string | null };

/**
 * A kysely instance whose every statement goes to `client` (a `pg` Client or
 * PoolClient the caller holds, inside BEGIN); null when `client` has no
 * `query` function; `{ refused }` when no transaction is open on it. The
 * caller keeps the client: it is never released or ended here.
 */
async function adoptPgClient(client: object): Promise<AnyDb | { refused: string } | null> {
  const c = client as Partial<Queryable>;
  if (typeof c.query !== "function") return null;
  const refused = await transactionRefusal(client as Queryable);
  if (refused !== null) return { refused };
  let db = adopted.get(client);
  if (!db) {
    const query = (c.query as (...args: unknown[]) => Promise<unknown>).bind(client);
    // getTransactionStatus() may still say T just after a failed statement (pg settles the statement's promise
    // before the server's ReadyForQuery E arrives): the first statement then meets the aborted transaction.
    const lent = {
      query: (...args: unknown[]) =>
        query(...args).catch((error: unknown) => {
          if ((error as { code?: unknown })?.code === "25P02") throw new InvalidArgumentError(`postgres: transaction must be a client inside BEGIN; ${ABORTED}`);
          throw error;
        }),
      release: () => undefined,
    };
    const pool = { connect: async () => lent, end: async () => undefined } as unknown as PostgresPool;
    db = new Kysely({ dialect: new PostgresDialect({ pool }) });
    adopted.set(client, db);
  }
  return db;
}

const ABORTED = "its transaction failed and must be rolled back";
const NO_TRANSACTION = "got a pool, or a client with no transaction open (call BEGIN on one client first)";

/** Engine.transactionOnClient on a `pg` Client or PoolClient. */
async function transactionOnClient<T>(client: object, fn: (db: AnyDb) => Promise<T>): Promise<T> {
  const c = client as Partial<Queryable> & { totalCount?: unknown };
  const what = "ctx.transaction: { client } must be a pg Client or PoolClient with no transaction open";
  if (typeof c.query !== "function") throw new InvalidArgumentError(`${what}; got an object without query()`);
  if (typeof c.totalCount === "number") throw new InvalidArgumentError(`${what}; got a pg.Pool, which runs each statement on any of its connections: pass one client from pool.connect()`);
  const status = typeof c.getTransactionStatus === "function" ? c.getTransactionStatus() : null;
  if (status !== "I" && (await transactionRefusal(c as Queryable)) !== NO_TRANSACTION) {
    throw new InvalidArgumentError(`${what}; it is inside BEGIN: ctx.transaction sends BEGIN and COMMIT on it itself`);
  }
  const query = c.query.bind(client) as (text: string) => Promise<{ command?: string }>;
  await query("BEGIN");
  try {
    const db = await adoptPgClient(client);
    if (db === null || "refused" in db) throw new InvalidArgumentError(`${what}; after BEGIN: ${db === null ? "not a client" : db.refused}`);
    const value = await fn(db);
    // COMMIT of a failed transaction answers ROLLBACK instead of an error.
    if ((await query("COMMIT")).command === "ROLLBACK") throw new InvalidArgumentError(`ctx.transaction: the transaction on { client } failed (a statement in it raised an error that was caught), so COMMIT rolled it back`);
    return value;
  } catch (error) {
    await query("ROLLBACK").catch(() => undefined);
    throw error;
  }
}

/**
 * Null when a transaction block is open on `client`, else why not. pg's
 * `getTransactionStatus()` (the status byte of the server's last
 * ReadyForQuery: T in a block, E in a failed one, I idle) answers at no cost
 * when it says T or E. Otherwise (idle, or a BEGIN still in flight, or a
 * pool or client without the method) one probe asks the server: SAVEPOINT
 * is refused outside a block (25P01, also on whichever connection a pool
 * picks) and fails in an aborted one (25P02); inside a block the savepoint is
 * released at once, leaving the caller's transaction as it was.
 */
async function transactionRefusal(client: Queryable): Promise<string | null> {
  const status = typeof client.getTransactionStatus === "function" ? client.getTransactionStatus() : null;
  if (status === "T") return null;
  if (status === "E") return ABORTED;
  try {
    await client.query("savepoint docket_probe; release savepoint docket_probe");
    return null;
  } catch (error) {
    const code = (error as { code?: unknown })?.code;
    if (code === "25P01") return NO_TRANSACTION;
    if (code === "25P02") return ABORTED;
    throw error;
  }
}
