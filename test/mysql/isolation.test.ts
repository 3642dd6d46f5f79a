import { sql } from "kysely";
import { afterAll, describe, expect, it } from "vitest";
import { mysqlAdapter } from "../../src/adapters/mysql/index.ts";
import type { Engine } from "../../src/adapters/kysely/engine.ts";
import { Docket } from "../../src/client/docket.ts";
import { createMysqlTestDatabase, dropMysqlDatabase } from "../support/targets.ts";

const created = await createMysqlTestDatabase("docket_iso", "the mysql isolation tests");
const mysql = (await import("mysql2/promise")).default;

/**
 * An engine whose every write transaction first finds out, by behaviour,
 * whether a statement sees a row another connection committed after the
 * transaction's first read: "read committed" when it does, "snapshot" when not.
 */
function recording(levels: string[], insertElsewhere: () => Promise<void>): (engine: Engine) => Engine {
  return (engine) => ({
    ...engine,
    writeTransaction: (db, fn) =>
      engine.writeTransaction(db, async (trx) => {
        const count = async () => Number((await sql<{ n: number }>`select count(*) as n from iso_probe`.execute(trx)).rows[0]!.n);
        const before = await count();
        await insertElsewhere();
        levels.push((await count()) > before ? "read committed" : "snapshot");
        return fn(trx);
      }),
  });
}

/** Docket's claims count running jobs with plain reads after taking locks: each must see what committed before it (READ COMMITTED), not a snapshot. */
describe.skipIf(created === null)("mysql: every docket transaction runs at READ COMMITTED", () => {
  afterAll(async () => {
    if (created) await dropMysqlDatabase(created.database);
  });

  for (const how of ["its own pool (uri)", "a pool the caller passes"] as const) {
    it(`on ${how}`, async () => {
      const other = await mysql.createConnection({ uri: created!.url });
      await other.query("CREATE TABLE IF NOT EXISTS iso_probe (id INT AUTO_INCREMENT PRIMARY KEY) ENGINE=InnoDB");
      const pool = how === "a pool the caller passes" ? (await import("mysql2")).default.createPool({ uri: created!.url, connectionLimit: 2 }) : null;
      const levels: string[] = [];
      const adapter = mysqlAdapter({
        ...(pool ? { pool: pool as never } : { uri: created!.url, connectionLimit: 2 }),
        tablePrefix: how === "its own pool (uri)" ? "own_" : "theirs_",
        instrument: { wrapEngine: recording(levels, async () => void (await other.query("INSERT INTO iso_probe () VALUES ()"))) },
      });
      try {
        const d = new Docket({ adapter });
        await d.migrate();
        await d.enqueueMany([{ task: "t", payload: 1 }, { task: "t", payload: 2 }]);
        await d.setQueueCap("default", 5); // the claim takes the transaction that applies caps
        const now = Date.now();
        const claimed = await adapter.claim({ queues: ["default"], limit: 2, now, leaseToken: "tok", leaseExpiresAt: now + 60_000 });
        expect(claimed).toHaveLength(2);
        expect(levels.length).toBeGreaterThanOrEqual(2);
        expect(new Set(levels)).toEqual(new Set(["read committed"]));
      } finally {
        await adapter.close();
        await other.end();
        await new Promise<void>((resolve) => (pool ? pool.end(() => resolve()) : resolve()));
      }
    });
  }
});
