import { afterAll, describe, expect, it } from "vitest";
import mysql from "mysql2/promise";
import { mysqlAdapter } from "../../src/adapters/mysql/index.ts";
import { Docket } from "../../src/index.ts";
import { MYSQL_URL, createMysqlTestDatabase, dropMysqlDatabase } from "../support/targets.ts";
import { runCli } from "../support/cli.ts";

const created = await createMysqlTestDatabase("docket_lp", "the MariaDB least-privilege user test");
const user = `docket_lp_${process.pid.toString(36)}${Date.now().toString(36)}`.slice(0, 32);
afterAll(async () => {
  if (!created) return;
  await dropMysqlDatabase(created.database);
  const root = await mysql.createConnection({ uri: MYSQL_URL });
  await root.query(`DROP USER IF EXISTS '${user}'@'%'`);
  await root.end();
});

/**
 * A deployment where the owner migrates and workers connect as a user with
 * only SELECT, INSERT, UPDATE, DELETE on the database: the Quick start's
 * `migrate()` as that user succeeds and applies nothing, and jobs run.
 */
describe.skipIf(!created)("mysql: a least-privilege worker user", () => {
  it("with SELECT, INSERT, UPDATE, DELETE on the database (no CREATE): migrate() applies nothing, and a job enqueues and runs", async () => {
    const owner = mysqlAdapter({ uri: created!.url });
    const migrated = await new Docket({ adapter: owner }).migrate();
    await owner.close();
    expect(migrated.applied.length).toBeGreaterThan(0);

    const root = await mysql.createConnection({ uri: MYSQL_URL });
    try {
      await root.query(`CREATE USER '${user}'@'%' IDENTIFIED BY 'docket-lp'`);
      // The GRANT docs/databases.md ("Least-privilege roles") gives for a worker user on MariaDB, nothing more.
      await root.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ${created!.database}.* TO '${user}'@'%'`);
    } finally {
      await root.end();
    }
    const asWorker = new URL(created!.url);
    asWorker.username = user;
    asWorker.password = "docket-lp";

    const probe = await mysql.createConnection({ uri: asWorker.toString() });
    try {
      await expect(probe.query("CREATE TABLE docket_lp_probe (id int)")).rejects.toThrow(/CREATE command denied/);
    } finally {
      await probe.end();
    }

    const adapter = mysqlAdapter({ uri: asWorker.toString() });
    const docket = new Docket({ adapter });
    const worker = docket.worker({ handlers: { t: (payload) => ({ doubled: (payload as { n: number }).n * 2 }) }, pollMs: 50, logger: null });
    try {
      expect(await docket.migrate()).toEqual({ applied: [], version: migrated.version });
      await worker.start();
      const job = await docket.enqueue("t", { n: 21 }, { concurrency: { key: "k", limit: 1 }, idempotencyKey: "once" });
      const done = await docket.waitFor(job.id, { timeoutMs: 10_000 });
      expect([done.state, done.result]).toEqual(["succeeded", { doubled: 42 }]);
      // health() reads InnoDB's transactions and purge history, which need PROCESS: without it, null, not an error.
      expect(await docket.health()).toEqual({ oldestTransactionAgeMs: null, deadRows: null, purgeBacklog: null, autovacuum: null });
      const status = await runCli(asWorker.toString(), "status");
      expect([status.code, status.stdout]).toEqual([0, expect.stringContaining("note: the oldest open transaction cannot be read with this role")]);
      const json = await runCli(asWorker.toString(), "status", "--json");
      expect([json.code, Object.keys(JSON.parse(json.stdout))]).toEqual([0, expect.arrayContaining(["queues", "rateLimits"])]);
    } finally {
      await worker.stop();
      await adapter.close();
    }
  });
});
