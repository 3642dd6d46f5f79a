import type { PostgresPool, PostgresPoolClient } from "kysely";
import { namingClient, type PreparedTexts } from "./prepared.ts";

/** The event-emitter part of `pg.Pool` and `pg.Client`, declared instead of importing pg's types. */
interface Emitter {
  on(event: string, listener: (...args: never[]) => void): unknown;
  removeListener(event: string, listener: (...args: never[]) => void): unknown;
}

export interface GuardedPool {
  /** The pool to hand to kysely. */
  readonly pool: PostgresPool;
  /**
   * Takes docket's listeners off the pool (a client still checked out keeps
   * its listener until it is released), so a caller's pool, which outlives
   * the adapter, holds nothing of it. The `'error'` listener of a pool
   * docket opened stays: that pool is ended with the adapter.
   */
  detach(): void;
}

function isEmitter(value: unknown): value is Emitter {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as Partial<Emitter>).on === "function" &&
    typeof (value as Partial<Emitter>).removeListener === "function"
  );
}

/**
 * A pool for kysely whose every checked-out client has an `'error'`
 * listener, so a connection the server terminates while it is checked out
 * (inside a transaction, between statements) is reported to `report`
 * instead of crashing the process as an unhandled `'error'` event (also on
 * clients the caller checks out of a pool it passed in). pg then fails the
 * statement in flight, and the pool discards the broken client when it is
 * released (pg marks it not queryable). The listener comes off on release,
 * when pg-pool's own idle listener is already in place, so listeners never
 * pile up on long-lived clients. When `ownPool` is true, the pool's own
 * `'error'` event (a client dropped while idle) is handled too. With
 * `prepared`, kysely gets each client wrapped so that those texts run as
 * named statements (`namingClient`); the pool's clients stay as they are.
 */
export function guardedPool(pool: PostgresPool, report: (error: unknown) => void, ownPool: boolean, prepared: PreparedTexts | null = null): GuardedPool {
  const onClientError = (error: unknown) => report(error);
  const held = new Set<Emitter>(); // guarded from 'acquire' to 'release'
  const forLife = new WeakSet<object>(); // guarded for good: the pool emitted no 'acquire'
  let detached = false;
  const wrappers = new WeakMap<object, PostgresPoolClient>();
  const emitter = isEmitter(pool) ? pool : null;
  const guard = (client: unknown) => {
    if (!isEmitter(client) || held.has(client)) return;
    held.add(client);
    client.on("error", onClientError);
  };
  const unguard = (_error: unknown, client: unknown) => {
    if (!isEmitter(client) || !held.delete(client)) return;
    client.removeListener("error", onClientError);
    if (detached && held.size === 0) emitter?.removeListener("release", unguard);
  };
  // pg-pool emits 'acquire' synchronously, before it removes its own idle listener: a FATAL
  // message that arrives in the same socket read as the end of the connect finds ours in place.
  // On release it attaches its idle listener before it emits 'release'.
  emitter?.on("acquire", guard);
  emitter?.on("release", unguard);
  // Never taken off: docket ends this pool on close(), and its clients may still report while closing.
  if (ownPool) emitter?.on("error", onClientError);
  return {
    pool: {
      async connect(): Promise<PostgresPoolClient> {
        const client = await pool.connect();
        if (isEmitter(client) && !held.has(client) && !forLife.has(client)) {
          forLife.add(client);
          client.on("error", onClientError);
        }
        return prepared ? namingClient(client, prepared, wrappers) : client;
      },
      end: () => pool.end(),
    },
    detach() {
      if (detached) return;
      detached = true;
      emitter?.removeListener("acquire", guard);
      if (held.size === 0) emitter?.removeListener("release", unguard);
    },
  };
}
