import assert from "node:assert/strict";
import { Kysely, SqliteDialect, sql } from "kysely";
import { nodeSqliteDatabase } from "../../src/adapters/sqlite/index.ts";
import { DatabaseSync } from "./node-sqlite.ts";

/**
 * The node:sqlite shim against kysely's SqliteDialect, for what the
 * conformance suite does not reach: docket's SQLite adapter always writes
 * with RETURNING, so `run()`'s counts and `iterate()` go unused there.
 */
function open() {
  const raw = new DatabaseSync(":memory:");
  const db = new Kysely<any>({ dialect: new SqliteDialect({ database: nodeSqliteDatabase(raw) }) });
  return { raw, db };
}

Deno.test("node-sqlite: a write without RETURNING reports affected rows and the insert id", async () => {
  const { db } = open();
  await sql`create table t (id integer primary key, v text)`.execute(db);
  const inserted = await db.insertInto("t").values([{ v: "a" }, { v: "b" }]).executeTakeFirstOrThrow();
  assert.equal(inserted.numInsertedOrUpdatedRows, 2n);
  assert.equal(inserted.insertId, 2n);
  const updated = await db.updateTable("t").set({ v: "c" }).where("id", ">=", 1).executeTakeFirstOrThrow();
  assert.equal(updated.numUpdatedRows, 2n);
  const deleted = await db.deleteFrom("t").where("id", "=", 1).executeTakeFirstOrThrow();
  assert.equal(deleted.numDeletedRows, 1n);
  await db.destroy();
});

Deno.test("node-sqlite: RETURNING, SELECT and PRAGMA statements are readers and return plain rows", async () => {
  const { db } = open();
  await sql`create table t (id integer primary key, v text)`.execute(db);
  const rows = await db.insertInto("t").values({ v: "a" }).returning(["id", "v"]).execute();
  assert.deepStrictEqual(rows, [{ id: 1, v: "a" }]);
  assert.equal(Object.getPrototypeOf(rows[0]), Object.prototype);
  assert.deepStrictEqual(await db.updateTable("t").set({ v: "b" }).returning("v").execute(), [{ v: "b" }]);
  assert.deepStrictEqual(await db.selectFrom("t").selectAll().execute(), [{ id: 1, v: "b" }]);
  const { rows: pragma } = await sql<{ timeout: number }>`pragma busy_timeout = 1234`.execute(db);
  assert.deepStrictEqual(pragma, [{ timeout: 1234 }]);
  await db.destroy();
});

Deno.test("node-sqlite: streams a select row by row; binds bigints; refuses to round an unsafe integer", async () => {
  const { db } = open();
  await sql`create table t (id integer primary key, n integer)`.execute(db);
  await db.insertInto("t").values([{ n: 1 }, { n: 2 }, { n: 3 }]).execute();
  const streamed: unknown[] = [];
  for await (const row of db.selectFrom("t").select("n").orderBy("id").stream()) streamed.push(row);
  assert.deepStrictEqual(streamed, [{ n: 1 }, { n: 2 }, { n: 3 }]);
  assert.deepStrictEqual((await sql<{ x: number }>`select ${2n ** 40n} as x`.execute(db)).rows, [{ x: 2 ** 40 }]);
  await assert.rejects(sql`select ${2n ** 60n} as x`.execute(db), RangeError);
  await db.destroy();
});

Deno.test("node-sqlite: close() on the shim closes the DatabaseSync", () => {
  const raw = new DatabaseSync(":memory:");
  nodeSqliteDatabase(raw).close();
  assert.equal(raw.isOpen, false);
});
