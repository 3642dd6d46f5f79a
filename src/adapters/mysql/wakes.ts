import { sql, type MysqlPool } from "kysely";
import type { ReadyNotice } from "../../core/adapter.ts";
import type { AnyDb } from "../kysely/engine.ts";
import { poolQuery } from "./pool.ts";

/** Default period of the wake counter check, ms. */
export const WAKE_CHECK_MS = 25;
/** How many times a bump that lost a race (errno 1213) is sent. */
const BUMP_TRIES = 5;
/** Slots of the wake table: slot 0 for docket's own bumps after commit, the others for bumps inside callers' transactions. */
export const WAKE_SLOTS = 32;

/**
 * Ready notices for MariaDB/MySQL, which have no NOTIFY: a wake table of
 * WAKE_SLOTS counters (`<prefix>wakes`, made by the migrations). Whatever
 * makes a job ready or due (what PostgreSQL announces with NOTIFY) adds 1 to
 * a counter after it commits; while anyone in the process listens, every
 * `intervalMs` ONE statement reads their sum, and when it changed every
 * listener is told `{queue: null, due: true}`.
 *
 * Guarantees and costs:
 * - A bump never waits for a caller's transaction: docket's own bumps run
 *   after the write committed, in autocommit, on slot 0, which only such
 *   bumps touch (each holds it for one statement); a bump inside a caller's
 *   transaction (`inTransaction`) takes a slot no one else holds (`SKIP
 *   LOCKED`), or none when all are held, and counts when the caller commits.
 * - At most one of docket's own bumps is in flight per process: bumps asked
 *   for meanwhile become one more, `intervalMs / 2` after it (a burst of
 *   commits sends one or two statements; a busy process at most about
 *   2000 / `intervalMs` a second).
 * - A change made only by this process's own bumps wakes no listener here:
 *   its Docket wakes its own workers.
 * - The bumps and checks run on the pool's connections directly, not
 *   through kysely (they are not the store's statements: instrumentation
 *   and statement counts do not see them).
 * - A hint, as onReady allows: a failed bump or check is dropped (polling
 *   stays the fallback), as the same kind of change made by this store's own
 *   writes (a promotion by one of its workers' outcomes wakes its other
 *   idle workers only at their next poll, as on SQLite).
 */
export interface Wakes {
  /** Counts a wake, for a write that has committed; resolves when it is counted (never rejects). */
  bump(): Promise<void>;
  /** Counts a wake when `trx`, a caller's open transaction, commits. */
  inTransaction(trx: AnyDb): Promise<void>;
  /** See DocketAdapter.onReady. */
  subscribe(listener: (notice: ReadyNotice) => void): () => void;
  close(): void;
}

/**
 * `pool` returns the store's pool once its dialect opened it (null before:
 * nothing is checked or bumped then); `report` gets a bump's unexpected error.
 */
export function wakes(options: { table: string; pool: () => MysqlPool | null; intervalMs: number; report: (error: unknown) => void }): Wakes {
  const { table, intervalMs } = options;
  const listeners = new Set<(notice: ReadyNotice) => void>();
  let timer: ReturnType<typeof setInterval> | null = null;
  let last: bigint | null = null;
  let checking = false;
  let closed = false;

  const query = async (text: string): Promise<unknown[]> => {
    const pool = options.pool();
    return pool === null ? [] : poolQuery(pool, text);
  };
  /** This process's own bumps counted since the last check: they wake no one here (its Docket wakes its own workers). */
  let own = 0;
  const check = async (): Promise<void> => {
    if (checking || closed) return;
    checking = true;
    try {
      const ownBefore = own;
      const rows = (await query(`SELECT COALESCE(SUM(n), 0) AS n FROM ${table}`)) as { n: unknown }[];
      if (rows.length === 0) return;
      const sum = BigInt(String(rows[0]!.n));
      // A bump of ours that lands between the read and its reply is counted at the next check: at worst one spurious wake, or one late.
      const foreign = last !== null && sum - last > BigInt(ownBefore);
      own -= ownBefore;
      last = sum;
      if (foreign) for (const listener of [...listeners]) listener({ queue: null, due: true });
    } catch {
      // Not migrated yet, or the server is away: the next check tries again.
    } finally {
      checking = false;
    }
  };
  /** The bump in flight, and the one asked for meanwhile (it starts when the first ends, at least `gapMs` after it). */
  let inFlight: Promise<void> | null = null;
  let queued: Promise<void> | null = null;
  const gapMs = Math.max(1, Math.floor(intervalMs / 2));
  const send = (attempt = 1): Promise<void> =>
    query(`UPDATE ${table} SET n = n + 1 WHERE slot = 0`).then(
      () => void own++,
      async (error) => {
        const errno = (error as { errno?: unknown })?.errno;
        // On Galera, bumps from several servers at once lose certification to each other (1213): a lost race, sent again.
        if (errno === 1213 && attempt < BUMP_TRIES && !closed) {
          await new Promise((r) => setTimeout(r, Math.random() * gapMs));
          return send(attempt + 1);
        }
        // A store not migrated yet has no wake table: nothing to tell.
        if (!closed && errno !== 1146) options.report(error);
      },
    );
  const bump = (): Promise<void> => {
    if (closed) return Promise.resolve();
    if (inFlight === null) {
      inFlight = send().finally(() => (inFlight = null));
      return inFlight;
    }
    queued ??= inFlight.then(async () => {
      await new Promise((r) => setTimeout(r, gapMs));
      queued = null;
      return bump();
    });
    return queued;
  };
  const stop = (): void => {
    if (timer !== null) clearInterval(timer);
    timer = null;
  };
  return {
    bump,
    async inTransaction(trx) {
      if (closed) return;
      try {
        const free = await sql<{ slot: number }>`select slot from ${sql.table(table)} where slot > 0 limit 1 for update skip locked`.execute(trx);
        const slot = free.rows[0]?.slot;
        if (slot !== undefined) await sql`update ${sql.table(table)} set n = n + 1 where slot = ${slot}`.execute(trx);
      } catch (error) {
        // InnoDB keeps the caller's transaction open after a failed statement: a wake lost is a poll's delay.
        if ((error as { errno?: unknown })?.errno !== 1146) throw error;
      }
    },
    subscribe(listener) {
      listeners.add(listener);
      if (timer === null && !closed) {
        last = null;
        void check();
        timer = setInterval(() => void check(), intervalMs);
        (timer as { unref?: () => void }).unref?.();
      }
      return () => {
        listeners.delete(listener);
        if (listeners.size === 0) stop();
      };
    },
    close() {
      closed = true;
      listeners.clear();
      stop();
    },
  };
}
