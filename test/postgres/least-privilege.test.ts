import { afterAll, describe, expect, it } from "vitest";
import pg from "pg";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import { Docket } from "../../src/index.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../support/targets.ts";

const created = await createPgTestDatabase("docket_lp", "the postgres least-privilege role test");
const url = created?.url ?? null;
const role = `docket_lp_${process.pid.toString(36)}${Date.now().toString(36)}`;
afterAll(async () => {
  if (!created) return;
  await dropPgDatabase(PG_URL, created.database);
  const root = new pg.Client({ connectionString: PG_URL });
  await root.connect();
  await root.query(`DROP ROLE IF EXISTS ${role}`);
  await root.end();
});

/** The GRANTs docs/databases.md ("Least-privilege roles") gives for a worker role on PostgreSQL (schema `public`, default tablePrefix), nothing more. */
const WORKER_GRANTS = [
  `GRANT USAGE ON SCHEMA public TO ${role}`,
  `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${role}`,
];

/**
 * A deployment where the owner migrates and workers connect as a role
 * without DDL rights: the Quick start's `migrate()` as that role succeeds
 * and applies nothing, and jobs enqueue and run.
 */
describe.skipIf(!url)("postgres: a least-privilege worker role", () => {
  it("with USAGE on the schema and SELECT/INSERT/UPDATE/DELETE on docket's tables (no CREATE): migrate() applies nothing, and a job enqueues and runs", async () => {
    const owner = postgresAdapter({ connectionString: url! });
    const migrated = await new Docket({ adapter: owner }).migrate();
    await owner.close();
    expect(migrated.applied.length).toBeGreaterThan(0);

    const admin = new pg.Client({ connectionString: url! });
    await admin.connect();
    try {
      // PostgreSQL 15's default already; explicit so that older servers test the same thing.
      await admin.query("REVOKE CREATE ON SCHEMA public FROM PUBLIC");
      await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'docket-lp'`);
      for (const grant of WORKER_GRANTS) await admin.query(grant);
    } finally {
      await admin.end();
    }
    const asWorker = new URL(url!);
    asWorker.username = role;
    asWorker.password = "docket-lp";

    const probe = new pg.Client({ connectionString: asWorker.toString() });
    await probe.connect();
    try {
      await expect(probe.query("CREATE TABLE docket_lp_probe (id int)")).rejects.toThrow(/permission denied/);
    } finally {
      await probe.end();
    }

    const adapter = postgresAdapter({ connectionString: asWorker.toString() });
    const docket = new Docket({ adapter });
    const worker = docket.worker({ handlers: { t: (payload) => ({ doubled: (payload as { n: number }).n * 2 }) }, pollMs: 50, logger: null });
    try {
      expect(await docket.migrate()).toEqual({ applied: [], version: migrated.version });
      await worker.start();
      const job = await docket.enqueue("t", { n: 21 }, { concurrency: { key: "k", limit: 1 }, idempotencyKey: "once" });
      const done = await docket.waitFor(job.id, { timeoutMs: 10_000 });
      expect([done.state, done.result]).toEqual(["succeeded", { doubled: 42 }]);
    } finally {
      await worker.stop();
      await adapter.close();
    }
  });
});
