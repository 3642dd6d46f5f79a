import { afterAll, describe, expect, it } from "vitest";
import mysql from "mysql2/promise";
import { mysqlAdapter } from "../../src/adapters/mysql/index.ts";
import { MYSQL_MAX_TABLE_PREFIX } from "../../src/adapters/mysql/mysql-adapter.ts";
import { Docket, InvalidArgumentError } from "../../src/index.ts";
import { createMysqlTestDatabase, dropMysqlDatabase } from "../support/targets.ts";

const created = await createMysqlTestDatabase("docket_prefix", "the MariaDB table prefix test");
afterAll(async () => {
  if (created) await dropMysqlDatabase(created.database);
});

/**
 * MariaDB's identifiers hold 64 characters: the longest prefix it accepts
 * is the one whose longest schema name still fits, and migrating with it
 * creates every table; one character more is refused at construction.
 */
describe.skipIf(!created)("mysql: the longest table prefix", () => {
  it(`takes a ${MYSQL_MAX_TABLE_PREFIX}-character prefix through every migration and a job; refuses ${MYSQL_MAX_TABLE_PREFIX + 1} with InvalidArgumentError, writing nothing`, async () => {
    const tooLong = "p".repeat(MYSQL_MAX_TABLE_PREFIX) + "_";
    expect(() => mysqlAdapter({ uri: created!.url, tablePrefix: tooLong })).toThrow(InvalidArgumentError);
    expect(() => mysqlAdapter({ uri: created!.url, tablePrefix: tooLong })).toThrow(/at most 39 characters on MariaDB/);

    const longest = "p".repeat(MYSQL_MAX_TABLE_PREFIX - 1) + "_";
    const adapter = mysqlAdapter({ uri: created!.url, tablePrefix: longest });
    const docket = new Docket({ adapter });
    try {
      expect((await docket.migrate()).applied.length).toBeGreaterThan(0);
      const job = await docket.enqueue("t", { n: 1 });
      const [claimed] = await adapter.claim({ queues: ["default"], limit: 1, now: Date.now(), leaseToken: "x", leaseExpiresAt: Date.now() + 30_000 });
      expect(claimed?.id).toBe(job.id);
    } finally {
      await adapter.close();
    }
    const root = await mysql.createConnection({ uri: created!.url });
    try {
      const [rows] = await root.query("select table_name as t from information_schema.tables where table_schema = database()");
      const names = (rows as { t: string }[]).map((r) => r.t);
      expect(names.every((n) => n.startsWith(longest))).toBe(true);
      expect(names.length).toBeGreaterThan(5);
    } finally {
      await root.end();
    }
  });
});
