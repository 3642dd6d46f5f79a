import type { PostgresPool, PostgresPoolClient } from "kysely";

/** The event-emitter part of `pg.Pool` and `pg.Client`, declared instead of importing pg's types. */
interface Emitter {
  on(event: string, listener: (error: unknown) => void): unknown;
}

/**
 * A pool for kysely whose every client docket checks out has an `'error'`
 * listener, so a connection the server terminates while docket holds it
 * (inside a transaction, between statements) is reported to `report`
 * instead of crashing the process as an unhandled `'error'` event. pg then
 * fails the statement in flight, and the pool discards the broken client
 * when it is released (pg marks it not queryable). When `ownPool` is true,
 * the pool's own `'error'` event (a client dropped while idle) is handled too.
 */
export function guardedPool(pool: PostgresPool, report: (error: unknown) => void, ownPool: boolean): PostgresPool {
  const guarded = new WeakSet<object>();
  if (ownPool) (pool as unknown as Emitter).on("error", report);
  return {
    async connect(): Promise<PostgresPoolClient> {
      const client = await pool.connect();
      if (!guarded.has(client)) {
        guarded.add(client);
        (client as unknown as Emitter).on("error", report);
      }
      return client;
    },
    end: () => pool.end(),
  };
}
