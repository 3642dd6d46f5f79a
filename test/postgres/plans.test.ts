import { afterAll, describe, expect, it } from "vitest";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import { Docket } from "../../src/index.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../support/targets.ts";

const pg = (await import("pg")).default;
const created = await createPgTestDatabase("docket_plans", "the postgres plan tests");
const url = created?.url ?? null;
afterAll(async () => {
  if (created) await dropPgDatabase(PG_URL, created.database);
});

/**
 * A statement PostgreSQL prepares is planned for good at its sixth run on a
 * connection (a generic plan), for the table as it was then. Made on a
 * nearly empty jobs table, the claim's and the completion's plans scanned
 * every job at each run once a burst arrived (a fair flood of 100,000 jobs
 * drained at 0.13-0.20 of the same flood without fairness keys), until the
 * table was next analyzed. The claim and the outcomes are planned at each run.
 */
describe.skipIf(!url)("postgres: plans made on an empty table", () => {
  it("claims and completions after a burst of 30,000 jobs never scan the whole jobs table, though they ran often while it was empty", async () => {
    // One connection: every statement below runs, and is planned, on it.
    const pool = new pg.Pool({ connectionString: url!, max: 1 });
    pool.on("error", () => undefined);
    const adapter = postgresAdapter({ pool: pool as never, tablePrefix: "pl_" });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      // Autovacuum's analyze would replan and hide the defect.
      await pool.query("ALTER TABLE pl_jobs SET (autovacuum_enabled = false)");
      let settled = 0;
      const drain = async (rounds: number, fair: boolean) => {
        for (let i = 0; i < rounds; i++) {
          const now = Date.now();
          const leaseToken = `t${fair}${i}${now}`;
          const got = await adapter.claim({ queues: [fair ? "fair" : "plain"], limit: 10, now, leaseToken, leaseExpiresAt: now + 60_000 });
          if (got.length > 0) settled += (await adapter.settle({ items: got.map((j) => ({ kind: "complete" as const, id: j.id, leaseToken, now, concurrencyKey: null })) })).filter((x) => x?.state === "succeeded").length;
        }
      };
      // The empty table: each statement runs well past the five runs after which PostgreSQL may keep a generic plan.
      for (const fair of [false, true]) {
        const options = fair ? { queue: "fair", fairness: { key: "k" } } : { queue: "plain" };
        for (let i = 0; i < 8; i++) {
          await docket.enqueueMany(Array.from({ length: 3 }, () => ({ task: "t", payload: {}, options })));
          await drain(1, fair);
        }
      }
      // The burst.
      for (const fair of [false, true]) {
        const options = fair ? { queue: "fair", fairness: { key: "flood" } } : { queue: "plain" };
        for (let i = 0; i < 15; i++) await docket.enqueueMany(Array.from({ length: 1000 }, () => ({ task: "t", payload: {}, options })));
      }
      const scans = async () => {
        // This connection's counts, published now (PostgreSQL 15+), then read.
        await pool.query("SELECT pg_stat_force_next_flush()");
        const r = await pool.query("SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'pl_jobs'");
        return Number(r.rows[0].seq_scan);
      };
      const before = await scans();
      settled = 0;
      await drain(5, false);
      await drain(5, true);
      const after = await scans();
      expect(settled, "each claim took 10 jobs and completed them").toBe(100);
      expect(after - before, "sequential scans of the jobs table by 10 claims and their completions").toBe(0);
    } finally {
      await adapter.close();
      await pool.end();
    }
  }, 60_000);
});
