import type { PostgresPool, PostgresPoolClient } from "kysely";

/** The event-emitter part of `pg.Pool` and `pg.Client`, declared instead of importing pg's types. */
interface Emitter {
  on(event: string, listener: (error: unknown) => void): unknown;
}

/**
 * A pool for kysely whose every client docket checks out has an `'error'`
 * listener, so a connection the server terminates while docket holds it
 * (inside a transaction, between statements) is reported to `report`
 * instead of crashing the process as an unhandled `'error'` event (also on
 * clients the caller checks out of a pool it passed in). pg then
 * fails the statement in flight, and the pool discards the broken client
 * when it is released (pg marks it not queryable). When `ownPool` is true,
 * the pool's own `'error'` event (a client dropped while idle) is handled too.
 */
export function guardedPool(pool: PostgresPool, report: (error: unknown) => void, ownPool: boolean): PostgresPool {
  const guarded = new WeakSet<object>();
  const guard = (client: unknown) => {
    if (typeof client !== "object" || client === null || guarded.has(client)) return;
    guarded.add(client);
    (client as Emitter).on("error", report);
  };
  const emitter = pool as unknown as Partial<Emitter>;
  // pg-pool emits 'acquire' synchronously, before it removes its own idle listener: a FATAL
  // message that arrives in the same socket read as the end of the connect finds ours in place.
  if (typeof emitter.on === "function") {
    emitter.on("acquire", guard);
    if (ownPool) emitter.on("error", report);
  }
  return {
    async connect(): Promise<PostgresPoolClient> {
      const client = await pool.connect();
      guard(client); // pools without 'acquire' events
      return client;
    },
    end: () => pool.end(),
  };
}
