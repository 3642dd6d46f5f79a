import Database from "better-sqlite3";
import { Kysely, SqliteDialect, sql } from "kysely";
import { describe, expect, it } from "vitest";
import type { AnyDb } from "../../src/adapters/kysely/engine.ts";
import { MAX_SHARED_TRANSACTION_MS, WriteBatches, type Begin } from "../../src/adapters/sqlite/write-batches.ts";

/**
 * Group commit (src/adapters/sqlite/write-batches.ts): writes that queue in
 * one process share a transaction, and each keeps the outcome a transaction
 * of its own would give it.
 */
function store() {
  const handle = new Database(":memory:");
  handle.exec("create table t (n integer not null)");
  const db = new Kysely<any>({ dialect: new SqliteDialect({ database: handle }) }) as AnyDb;
  const begins: number[] = [];
  const begin: Begin = async (conn) => {
    begins.push(Date.now());
    await sql`begin immediate`.execute(conn);
  };
  const insert = (n: number) => async (conn: AnyDb) => {
    await sql`insert into t (n) values (${n})`.execute(conn);
    return n;
  };
  const rows = () => handle.prepare("select n from t order by n").all().map((r) => (r as { n: number }).n);
  return { handle, db, begin, begins, insert, rows };
}

describe("sqlite: writes that queue in one process share a transaction", () => {
  it("the writes queued behind a running transaction commit in the next one, each settling with its own result", async () => {
    const { db, begin, begins, insert, rows } = store();
    const writes = new WriteBatches();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => writes.run(db, begin, insert(i))));
    expect(results).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(rows()).toEqual(Array.from({ length: 20 }, (_, i) => i));
    // The first ran alone (nothing queued when it began); the 19 that queued meanwhile shared one transaction.
    expect(begins.length).toBe(2);
  });

  it("a write that throws undoes only its own writes and rejects with its error; the others in its transaction commit", async () => {
    const { db, begin, begins, insert, rows } = store();
    const writes = new WriteBatches();
    const failing = async (conn: AnyDb) => {
      await insert(100)(conn);
      throw new Error("refused after writing");
    };
    const settled = await Promise.allSettled([writes.run(db, begin, insert(0)), writes.run(db, begin, insert(1)), writes.run(db, begin, failing), writes.run(db, begin, insert(2))]);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
    expect(String((settled[2] as PromiseRejectedResult).reason)).toMatch(/refused after writing/);
    expect(rows()).toEqual([0, 1, 2]);
    expect(begins.length).toBe(2);
  });

  it("a write that opens savepoints of its own and throws without releasing them still leaves none of its writes", async () => {
    const { db, begin, begins, insert, rows } = store();
    const writes = new WriteBatches();
    // Savepoints left open by the work, one of them of the name every write's savepoint once had.
    const failing = async (conn: AnyDb) => {
      await insert(100)(conn);
      await sql`savepoint docket_write`.execute(conn);
      await insert(101)(conn);
      await sql`savepoint inner_work`.execute(conn);
      await insert(102)(conn);
      throw new Error("refused after its own savepoints");
    };
    const settled = await Promise.allSettled([writes.run(db, begin, insert(0)), writes.run(db, begin, insert(1)), writes.run(db, begin, failing), writes.run(db, begin, insert(2))]);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
    expect(rows()).toEqual([0, 1, 2]);
    expect(begins.length).toBe(2);
  });

  it("a failure that ends the shared transaction rejects every write it ran, and none of their writes remain; the writes it had not run go on", async () => {
    const { db, begin, insert, rows } = store();
    const writes = new WriteBatches();
    // What SQLite does on SQLITE_FULL or SQLITE_IOERR: the whole transaction is rolled back under the writes.
    const endsTransaction = async (conn: AnyDb) => {
      await sql`rollback`.execute(conn);
      throw new Error("disk full");
    };
    const settled = await Promise.allSettled([writes.run(db, begin, insert(0)), writes.run(db, begin, insert(1)), writes.run(db, begin, endsTransaction), writes.run(db, begin, insert(2))]);
    // [0] alone; [1, ends, 2] shared: 1 and the failing write ran in the lost transaction, 2 had not yet, and runs in the next.
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "rejected", "fulfilled"]);
    for (const s of settled.slice(1, 3)) expect(String((s as PromiseRejectedResult).reason)).toMatch(/disk full/);
    expect(rows()).toEqual([0, 2]);
    // The queue goes on.
    expect(await writes.run(db, begin, insert(3))).toBe(3);
    expect(rows()).toEqual([0, 2, 3]);
  });

  it("a shared transaction that cannot open a write's savepoint fails that write, and the queue goes on", async () => {
    const handle = new Database(":memory:");
    handle.exec("create table t (n integer not null)");
    // Every SAVEPOINT fails, as on a connection that keeps failing: a lone write needs none.
    const failing = new Proxy(handle, {
      get(target, property) {
        if (property === "prepare") return (text: string) => (/^savepoint/i.test(text) ? (() => { throw new Error("disk I/O error"); })() : target.prepare(text));
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const db = new Kysely<any>({ dialect: new SqliteDialect({ database: failing as never }) }) as AnyDb;
    // A macrotask per transaction, so that a queue retrying the failed write forever fails this case by its timeout instead of holding the event loop.
    const begin: Begin = async (conn) => {
      await new Promise((resolve) => setImmediate(resolve));
      await sql`begin immediate`.execute(conn);
    };
    const insert = (n: number) => async (conn: AnyDb) => (await sql`insert into t (n) values (${n})`.execute(conn), n);
    const writes = new WriteBatches();
    // [0] alone; [1, 2] shared: 1's savepoint fails, so 1 fails; 2 runs alone next.
    const settled = await Promise.allSettled([0, 1, 2].map((n) => writes.run(db, begin, insert(n))));
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(String((settled[1] as PromiseRejectedResult).reason)).toMatch(/disk I\/O error/);
    expect(handle.prepare("select n from t order by n").all().map((r) => (r as { n: number }).n)).toEqual([0, 2]);
  }, 5_000);

  it("a shared transaction starts no write once it has held the lock for MAX_SHARED_TRANSACTION_MS: the rest commit in the next, in order", async () => {
    const { db, begin, begins, rows } = store();
    const writes = new WriteBatches();
    // Each write holds the lock longer than the budget, however fast the machine: no second write may join its transaction.
    const slow = (n: number) => async (conn: AnyDb) => {
      const until = Date.now() + MAX_SHARED_TRANSACTION_MS * 1.1;
      while (Date.now() < until);
      await sql`insert into t (n) values (${n})`.execute(conn);
      return n;
    };
    const results = await Promise.all([0, 1, 2, 3, 4].map((n) => writes.run(db, begin, slow(n))));
    expect(results).toEqual([0, 1, 2, 3, 4]);
    expect(rows()).toEqual([0, 1, 2, 3, 4]);
    // [0] alone; then [1], [2], [3], [4]: each found the budget spent after its first write (without it: [1, 2, 3, 4]).
    // (Writes within the budget do share: the first case.) The budget of 0.75 of it per write, which expected [1, 2]
    // then [3, 4], failed once on a loaded machine (session 62): a write preempted past the budget ran alone.
    expect(begins.length).toBe(5);
  });

  it("a write marked alone, and writes of another database, never share a transaction", async () => {
    const a = store();
    const b = store();
    const writes = new WriteBatches();
    await Promise.all([
      writes.run(a.db, a.begin, a.insert(0)),
      writes.run(a.db, a.begin, a.insert(1)),
      writes.run(a.db, a.begin, a.insert(2), true),
      writes.run(a.db, a.begin, a.insert(3)),
      writes.run(b.db, b.begin, b.insert(4)),
      writes.run(a.db, a.begin, a.insert(5)),
    ]);
    expect(a.rows()).toEqual([0, 1, 2, 3, 5]);
    expect(b.rows()).toEqual([4]);
    // a: [0], [1], [2] alone, [3], then [5] after b's transaction.
    expect(a.begins.length).toBe(5);
    expect(b.begins.length).toBe(1);
  });

  it("a write sees the writes of those before it in its transaction, and runs after them", async () => {
    const { db, begin, insert } = store();
    const writes = new WriteBatches();
    const count = async (conn: AnyDb) => Number((await sql<{ c: number }>`select count(*) as c from t`.execute(conn)).rows[0]!.c);
    const [, , , seen] = await Promise.all([writes.run(db, begin, insert(0)), writes.run(db, begin, insert(1)), writes.run(db, begin, insert(2)), writes.run(db, begin, count)]);
    expect(seen).toBe(3);
  });
});
