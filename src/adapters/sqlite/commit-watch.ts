import type { SqliteDatabase, SqliteStatement } from "kysely";
import type { ReadyNotice } from "../../core/adapter.ts";

/** Default period of the check for other connections' commits, ms. */
export const COMMIT_CHECK_MS = 25;

/** Subscriptions to other connections' commits on one SQLite file. */
export interface CommitWatch {
  /** See DocketAdapter.onReady. The checks run while at least one listener is subscribed. */
  subscribe(listener: (notice: ReadyNotice) => void): () => void;
  /** Stops the checks and drops every listener. */
  close(): void;
}

/**
 * Ready notices for SQLite, which has no NOTIFY. While anyone listens, every
 * `intervalMs` it reads `PRAGMA data_version` on the store's own handle
 * (synchronously, outside kysely: it sends no statement through the dialect
 * and waits for no transaction); when the value changed since the last
 * check, another connection (another process, or another handle on the file
 * in this process) committed, and every listener is told `{queue: null,
 * due: true}` (some queue may have a job ready or due). Commits made through
 * this handle itself do not change it: the Docket wakes its own workers for
 * those. A hint, as the interface allows: a change between the handle's
 * opening and the first check is not reported. `handle` returns null until
 * the store opened its file; a check that fails (the file closed) is skipped.
 */
export function commitWatch(handle: () => SqliteDatabase | null, intervalMs: number): CommitWatch {
  const listeners = new Set<(notice: ReadyNotice) => void>();
  let timer: ReturnType<typeof setInterval> | null = null;
  let statement: SqliteStatement | null = null;
  let last: unknown = null;
  const check = (): void => {
    const db = handle();
    if (db === null) return;
    try {
      statement ??= db.prepare("pragma data_version");
      const version = (statement.all([])[0] as { data_version?: unknown } | undefined)?.data_version ?? null;
      const changed = last !== null && version !== last;
      last = version;
      if (changed) for (const listener of [...listeners]) listener({ queue: null, due: true });
    } catch {
      statement = null;
    }
  };
  const stop = (): void => {
    if (timer !== null) clearInterval(timer);
    timer = null;
    statement = null;
  };
  return {
    subscribe(listener) {
      listeners.add(listener);
      if (timer === null) {
        last = null;
        check();
        timer = setInterval(check, intervalMs);
        (timer as { unref?: () => void }).unref?.();
      }
      return () => {
        listeners.delete(listener);
        if (listeners.size === 0) stop();
      };
    },
    close() {
      listeners.clear();
      stop();
    },
  };
}
