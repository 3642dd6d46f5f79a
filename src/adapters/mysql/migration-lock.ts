import { sql } from "kysely";
import { AdapterError } from "../../core/errors.ts";
import type { AnyDb } from "../kysely/engine.ts";

/** How long a taken lock row stays held without renewal (a migrator that died leaves it; another takes it after this). */
const HOLD_MS = 60_000;
/** How often the holder renews it. */
const RENEW_MS = 10_000;
/** How long a migrator waits for the row before it gives up. */
const WAIT_MS = 120_000;
/** errnos of a take that lost to another server's (certification) or met a server not synced: tried again. */
const LOST = new Set([1213, 1047]);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `fn` holding the one row of `table` (created when missing), on one
 * connection: the migration lock where GET_LOCK is per server (Galera). A
 * migrator takes the row when it is free or its holder let it expire
 * (HOLD_MS without renewal), renews it every RENEW_MS while `fn` runs, and
 * deletes it after. The take is one write, certified like any other: of two
 * migrators on different servers, one holds the row and the other waits.
 * Reads on that connection are causal (`wsrep_sync_wait` 1, restored after).
 * Throws AdapterError when the row stays taken for WAIT_MS.
 */
export function withLockRow<T>(db: AnyDb, table: string, fn: (db: AnyDb) => Promise<T>): Promise<T> {
  const holder = globalThis.crypto.randomUUID();
  return db.connection().execute(async (conn) => {
    const before = await sql<{ wait: number | string }>`select @@session.wsrep_sync_wait as wait`.execute(conn);
    await sql`set session wsrep_sync_wait = 1`.execute(conn);
    try {
      await sql`create table if not exists ${sql.table(table)} (id tinyint not null primary key, holder varchar(64) not null, expires_at bigint not null) engine=InnoDB`.execute(conn);
      const deadline = Date.now() + WAIT_MS;
      for (;;) {
        const now = Date.now();
        try {
          // Each assignment reads the row's expires_at before this statement: holder first, then expires_at.
          await sql`insert into ${sql.table(table)} (id, holder, expires_at) values (1, ${holder}, ${now + HOLD_MS})
            on duplicate key update holder = if(expires_at < ${now}, values(holder), holder), expires_at = if(expires_at < ${now}, values(expires_at), expires_at)`.execute(conn);
        } catch (error) {
          if (!LOST.has((error as { errno?: number }).errno ?? 0)) throw error;
        }
        const row = await sql<{ holder: string }>`select holder from ${sql.table(table)} where id = 1`.execute(conn);
        if (row.rows[0]?.holder === holder) break;
        if (Date.now() > deadline) throw new AdapterError(`mysql: the migration lock row ${table} stayed taken for ${WAIT_MS / 1000} s (held by another migrator, or left by one that died ${HOLD_MS / 1000} s before it expires)`);
        await sleep(100 + Math.random() * 100);
      }
      const renew = setInterval(() => {
        sql`update ${sql.table(table)} set expires_at = ${Date.now() + HOLD_MS} where id = 1 and holder = ${holder}`.execute(db).catch(() => undefined);
      }, RENEW_MS);
      try {
        return await fn(conn);
      } finally {
        clearInterval(renew);
        await sql`delete from ${sql.table(table)} where id = 1 and holder = ${holder}`.execute(conn);
      }
    } finally {
      await sql`set session wsrep_sync_wait = ${Number(before.rows[0]?.wait ?? 0)}`.execute(conn);
    }
  });
}
