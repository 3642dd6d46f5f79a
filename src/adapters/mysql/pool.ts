import type { MysqlPool, MysqlPoolConnection, MysqlQueryResult } from "kysely";

/**
 * errnos the server sends just before it closes the connection:
 * ER_NET_PACKET_TOO_LARGE (a statement over `max_allowed_packet`),
 * ER_CONNECTION_KILLED, ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8).
 */
const CLOSING_ERRNOS = new Set([1153, 1927, 4031]);

/** A mysql2 pool connection: `destroy()` closes it and takes it out of its pool. */
type Destroyable = MysqlPoolConnection & { destroy?: () => void };

/**
 * `pool` as kysely's MysqlDialect uses it, except that a connection the
 * server closed, or is closing, after an error is never handed out again:
 * mysql2 reports such an error (e.g. a statement over `max_allowed_packet`)
 * as an ordinary query error and learns of the closed socket only later, so
 * a connection released back to the pool would fail the next, unrelated
 * statement with ECONNRESET. Once a statement fails that way, every later
 * statement on that connection (a ROLLBACK) fails at once with the same
 * error, and the connection is destroyed, not released.
 */
export function discardingClosedConnections(pool: MysqlPool): MysqlPool {
  const wrappers = new WeakMap<MysqlPoolConnection, MysqlPoolConnection>();
  const wrap = (raw: Destroyable): MysqlPoolConnection => {
    let wrapper = wrappers.get(raw);
    if (wrapper) return wrapper;
    let closedBy: unknown = null;
    const query = (sql: string, parameters: unknown[], callback?: (error: unknown, result: MysqlQueryResult) => void) => {
      if (callback === undefined) return raw.query(sql, parameters);
      if (closedBy !== null) return queueMicrotask(() => callback(closedBy, []));
      raw.query(sql, parameters, (error, result) => {
        if (error && closesConnection(error)) closedBy = error;
        callback(error, result);
      });
    };
    wrapper = {
      query: query as MysqlPoolConnection["query"],
      release() {
        if (closedBy === null || typeof raw.destroy !== "function") return raw.release();
        raw.destroy();
      },
    };
    wrappers.set(raw, wrapper);
    return wrapper;
  };
  return {
    getConnection: (callback) => pool.getConnection((error, raw) => callback(error, error ? raw : wrap(raw))),
    end: (callback) => pool.end(callback),
  };
}

/** Whether the connection a statement failed on is (being) closed: a fatal (network) error, or one of CLOSING_ERRNOS. */
function closesConnection(error: unknown): boolean {
  const e = error as { fatal?: unknown; errno?: unknown };
  return e.fatal === true || (typeof e.errno === "number" && CLOSING_ERRNOS.has(e.errno));
}

/** Runs `text` (no parameters) on one of `pool`'s connections, beside kysely, and resolves with its rows (none for a write). */
export function poolQuery(pool: MysqlPool, text: string): Promise<unknown[]> {
  return new Promise((resolve, reject) =>
    pool.getConnection((error, connection) => {
      if (error) return reject(error);
      connection.query(text, [], (qerror: unknown, result: { rows?: unknown[] } | unknown) => {
        connection.release();
        if (qerror) reject(qerror);
        else resolve(Array.isArray(result) ? result : ((result as { rows?: unknown[] })?.rows ?? []));
      });
    }),
  );
}
