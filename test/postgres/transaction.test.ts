import { afterAll, describe, expect, it } from "vitest";
import pg from "pg";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import { Docket } from "../../src/index.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../support/targets.ts";
import { until } from "../support/until.ts";

const created = await createPgTestDatabase("docket_tx", "the postgres transactional enqueue tests");
const url = created?.url ?? null;
afterAll(async () => {
  if (created) await dropPgDatabase(PG_URL, created.database);
});

/**
 * Issue 10 item 2 on PostgreSQL: enqueue with a plain `pg` client inside
 * BEGIN (no kysely in the application); the job exists iff the client's
 * transaction commits, and the NOTIFY sent in it wakes an idle worker only
 * at commit.
 */
describe.skipIf(!url)("postgres: enqueue in the caller's pg transaction", () => {
  it("a job enqueued through a pg client inside BEGIN exists iff it commits, and wakes an idle worker at commit", async () => {
    const adapter = postgresAdapter({ connectionString: url!, tablePrefix: "t1_" });
    const client = new pg.Client({ connectionString: url! });
    await client.connect();
    const docket = new Docket({ adapter });
    await docket.migrate();
    const started: number[] = [];
    const worker = docket.worker({ handlers: { t: (_p, ctx) => void started.push(ctx.job.id) }, pollMs: 3_600_000, logger: null });
    try {
      await worker.start();
      await new Promise((r) => setTimeout(r, 300));

      await client.query("BEGIN");
      const rolledBack = await docket.enqueue("t", { n: 1 }, { transaction: client });
      await client.query("ROLLBACK");
      expect(await docket.get(rolledBack.id)).toBeNull();

      await client.query("BEGIN");
      const job = await docket.enqueue("t", { n: 2 }, { transaction: client });
      expect(job.created).toBe(true);
      expect(await docket.get(job.id)).toBeNull();
      await new Promise((r) => setTimeout(r, 200));
      expect(started).toEqual([]);
      await client.query("COMMIT");
      await until(() => started.includes(job.id), 5_000, "the idle worker (one-hour poll) started the job once the transaction committed");
      expect(started).toEqual([job.id]);
    } finally {
      await worker.stop();
      await client.end();
      await adapter.close();
    }
  });
});
