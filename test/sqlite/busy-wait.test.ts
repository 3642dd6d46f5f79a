import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { sqliteAdapter } from "../../src/adapters/sqlite/index.ts";
import { Docket } from "../../src/index.ts";

/**
 * Another connection to the file (another process, or another handle in
 * this one) holds SQLite's write lock: docket's write must wait for it
 * without holding the event loop. The driver's busy handler would sleep on
 * this thread, so here, where the holder is in the same thread, it could
 * never commit: the write would fail after busyTimeoutMs with no timer run.
 */
/** A docket on a fresh file, with `other`, a second handle on that file, for `fn`; both closed after. */
async function withOtherHandle(busyTimeoutMs: number, fn: (docket: Docket, other: Database.Database) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "docket-busy-"));
  const file = join(dir, "jobs.db");
  const adapter = sqliteAdapter({ filename: file, busyTimeoutMs });
  const other = new Database(file);
  try {
    const docket = new Docket({ adapter });
    await docket.migrate();
    await fn(docket, other);
  } finally {
    other.close();
    await adapter.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("sqlite: waiting for another connection's write lock", () => {
  it("a write waits on timers, so the event loop runs (and the holder can commit) meanwhile", () =>
    withOtherHandle(2000, async (docket, other) => {
      other.exec("BEGIN IMMEDIATE");
      let ticks = 0;
      const interval = setInterval(() => ticks++, 5);
      const enqueued = docket.enqueue("t", { n: 1 });
      await new Promise((resolve) => setTimeout(resolve, 150));
      const ticksWhileLocked = ticks;
      other.exec("COMMIT");
      const job = await enqueued;
      clearInterval(interval);
      expect(ticksWhileLocked).toBeGreaterThanOrEqual(5);
      expect((await docket.get(job.id))?.state).toBe("ready");
    }));

  it("gives up with SQLite's error after busyTimeoutMs, and writes nothing", () =>
    withOtherHandle(100, async (docket, other) => {
      other.exec("BEGIN IMMEDIATE");
      await expect(docket.enqueue("t", {})).rejects.toThrow(/database is locked/);
      other.exec("COMMIT");
      expect((await docket.list({})).length).toBe(0);
      await docket.enqueue("t", {});
      expect((await docket.list({})).length).toBe(1);
    }));
});

describe("sqlite: waiting for a lock on a handle the application shares", () => {
  it("the handle keeps its busy timeout while docket waits, and docket's write lands after the holder commits", async () => {
    const dir = mkdtempSync(join(tmpdir(), "docket-busy-"));
    const file = join(dir, "jobs.db");
    const shared = new Database(file);
    const other = new Database(file);
    const adapter = sqliteAdapter({ database: shared, busyTimeoutMs: 2000 });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      other.exec("BEGIN IMMEDIATE");
      const enqueued = docket.enqueue("t", {});
      await new Promise((resolve) => setTimeout(resolve, 60));
      expect(shared.pragma("busy_timeout", { simple: true })).toBe(2000);
      other.exec("COMMIT");
      await enqueued;
      expect((await docket.list({})).length).toBe(1);
    } finally {
      other.close();
      await adapter.close();
      shared.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("sqlite: a blocking adapter", () => {
  it("says its statements run on the caller's thread, so a worker does not overlap a claim with outcome writes", async () => {
    const adapter = sqliteAdapter({ filename: ":memory:" });
    try {
      expect(adapter.blocking).toBe(true);
    } finally {
      await adapter.close();
    }
  });
});
