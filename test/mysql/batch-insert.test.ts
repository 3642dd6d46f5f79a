import { afterAll, describe, expect, it } from "vitest";
import { mysqlAdapter } from "../../src/adapters/mysql/index.ts";
import type { Engine } from "../../src/adapters/kysely/engine.ts";
import { Docket } from "../../src/client/docket.ts";
import { tapDialect } from "../../src/testing/kysely/tapped-driver.ts";
import { createMysqlTestDatabase, dropMysqlDatabase } from "../support/targets.ts";

/**
 * The three ways a batch is inserted on MySQL/MariaDB (insertRows): a
 * multi-row `INSERT … RETURNING` (MariaDB 10.5+, `Engine.insertReturning`),
 * or without it a multi-row INSERT read back by its consecutive ids
 * (`innodb_autoinc_lock_mode` 0 or 1), or one row per INSERT (mode 2, as on
 * Galera). The shared server is MariaDB in mode 1, so the other two paths
 * are taken here by wrapping the engine as a server without RETURNING, or
 * in mode 2, would be. Each must store every job once and hand back each
 * job's own record, in the order given.
 */
const created = await createMysqlTestDatabase("docket_batch", "the mysql batch insert tests");

type Path = "returning" | "consecutive" | "one row each";
const PATHS: [Path, (engine: Engine) => Engine][] = [
  ["returning", (e) => e],
  ["consecutive", (e) => ({ ...e, insertReturning: undefined })],
  ["one row each", (e) => ({ ...e, insertReturning: undefined, consecutiveInsertIds: async () => null })],
];

afterAll(async () => {
  if (created) await dropMysqlDatabase(created.database);
});

describe.skipIf(!created)("mysql: batch inserts", () => {
  PATHS.forEach(([path, wrapEngine], i) => {
    it(`${path}: 1,200 jobs in one enqueueMany are stored once each and returned in order, in ${path === "one row each" ? "1,200" : "3"} INSERTs`, async () => {
      const inserts: string[] = [];
      const adapter = mysqlAdapter({
        uri: created!.url,
        tablePrefix: `batch${i}_`,
        instrument: { wrapEngine, wrapDialect: (d) => tapDialect(d, { query: (sql) => void (/^\s*insert into `batch\d_jobs`/i.test(sql) && inserts.push(sql)) }) },
      });
      const docket = new Docket({ adapter });
      try {
        await docket.migrate();
        inserts.length = 0;
        const items = Array.from({ length: 1_200 }, (_, n) => ({ task: n % 2 === 0 ? "even" : "odd", payload: { n } }));
        const stored = await docket.enqueueMany(items);
        expect(stored.map((j) => j.payload)).toEqual(items.map((it) => it.payload));
        expect(stored.map((j) => j.task)).toEqual(items.map((it) => it.task));
        expect(new Set(stored.map((j) => j.id)).size).toBe(1_200);
        for (const j of stored.slice(0, 50)) expect((await docket.get(j.id))?.payload).toEqual(j.payload);
        expect(await docket.bulk.count({ state: "ready" })).toBe(1_200);
        expect(inserts).toHaveLength(path === "one row each" ? 1_200 : 3);
        expect(inserts.every((sql) => /returning/i.test(sql))).toBe(path === "returning");
      } finally {
        await docket.close();
      }
    });
  });
});
