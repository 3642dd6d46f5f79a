/**
 * mysqlAdapter's `uri` and `pool`. A uri mysql2 cannot read is refused when
 * the adapter is made, with a message that does not repeat it (before,
 * every call failed with an AdapterError whose cause held the whole URI,
 * password included, and a worker retried forever); needs no server. A
 * mysql2/promise pool works as its callback pool (before, every call waited
 * forever); needs the server.
 */
import { afterAll, describe, expect, it } from "vitest";
import { mysqlAdapter } from "../../src/adapters/mysql/index.ts";
import { InvalidArgumentError } from "../../src/core/errors.ts";
import { Docket } from "../../src/index.ts";
import { createMysqlTestDatabase, dropMysqlDatabase } from "../support/targets.ts";

const created = await createMysqlTestDatabase("docket_pools", "the MariaDB pool option test");
afterAll(async () => {
  if (created) await dropMysqlDatabase(created.database);
});

describe.skipIf(!created)("mysql: the pool option", () => {
  it("a mysql2/promise pool: migrate, enqueue, claim and stats answer (docket drives the callback pool it wraps); the caller's pool stays open", async () => {
    const mysql = (await import("mysql2/promise")).default;
    const pool = mysql.createPool({ uri: created!.url, connectionLimit: 3 });
    const docket = new Docket({ adapter: mysqlAdapter({ pool: pool as never }) });
    try {
      const answered = Promise.race([
        (async () => {
          await docket.migrate();
          const job = await docket.enqueue("t", { n: 1 });
          expect((await docket.get(job.id))?.state).toBe("ready");
          expect((await docket.stats()).queues.map((q) => [q.queue, q.counts.ready])).toEqual([["default", 1]]);
          return "answered";
        })(),
        new Promise((resolve) => setTimeout(() => resolve("waited 10 s"), 10_000)),
      ]);
      expect(await answered).toBe("answered");
    } finally {
      await docket.close();
    }
    const [rows] = await pool.query("select 1 as one");
    expect(rows).toEqual([{ one: 1 }]);
    await pool.end();
  }, 20_000);

  it("a pool that is no mysql2 pool is InvalidArgumentError", () => {
    expect(() => mysqlAdapter({ pool: {} as never })).toThrow(InvalidArgumentError);
  });
});

describe("mysql: the uri option", () => {
  it("a URI that is not a URL is InvalidArgumentError at once, and no message or cause holds its password", () => {
    for (const uri of ["mysql://root:s3cret@host:33o6/app", "mysql://root:s3cret@[bad/app", "mysql://root:s3cret@host:99999/app", ""]) {
      let error: unknown = null;
      try {
        mysqlAdapter({ uri });
      } catch (e) {
        error = e;
      }
      expect(error, uri).toBeInstanceOf(InvalidArgumentError);
      expect(JSON.stringify({ message: (error as Error).message, cause: String((error as Error).cause ?? "") })).not.toContain("s3cret");
    }
  });

  it("a URL mysql2 reads is taken (nothing is opened until the first call)", async () => {
    const adapter = mysqlAdapter({ uri: "mysql://root:s3cret@127.0.0.1:3306/app" });
    await adapter.close();
  });
});
