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
 * On PostgreSQL: enqueue with a plain `pg` client inside
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

  it("refuses a client outside BEGIN or in a failed transaction; a client without getTransactionStatus (pg-native, older pg) is asked the server; a BEGIN still in flight counts", async () => {
    const adapter = postgresAdapter({ connectionString: url!, tablePrefix: "t2_" });
    const client = new pg.Client({ connectionString: url! });
    await client.connect();
    const docket = new Docket({ adapter });
    await docket.migrate();
    // What pg-native and pg before getTransactionStatus() offer: query alone.
    const bare = { query: (text: string, values?: unknown[]) => client.query(text, values) };
    const invalid = (message: RegExp) => ({ code: "INVALID_ARGUMENT", message: expect.stringMatching(message) });
    try {
      await expect(docket.enqueue("t", { n: 1 }, { transaction: bare })).rejects.toMatchObject(invalid(/no transaction open/));
      await expect(docket.enqueue("t", { n: 1 }, { transaction: client })).rejects.toMatchObject(invalid(/no transaction open/));

      await client.query("BEGIN");
      const kept = await docket.enqueue("t", { n: 2 }, { transaction: bare });
      await client.query("COMMIT");
      expect((await docket.get(kept.id))?.state).toBe("ready");

      await client.query("BEGIN");
      await expect(client.query("select 1/0")).rejects.toThrow(/division by zero/);
      await expect(docket.enqueue("t", { n: 3 }, { transaction: client })).rejects.toMatchObject(invalid(/failed and must be rolled back/));
      await expect(docket.enqueue("t", { n: 3 }, { transaction: bare })).rejects.toMatchObject(invalid(/failed and must be rolled back/));
      // pg settles a failed statement's promise before the server's ReadyForQuery (status E) arrives, so
      // getTransactionStatus() can still say T: the aborted transaction is then met by the first statement.
      const stale = { query: (text: string, values?: unknown[]) => client.query(text, values), getTransactionStatus: () => "T" };
      await expect(docket.enqueue("t", { n: 3 }, { transaction: stale })).rejects.toMatchObject(invalid(/failed and must be rolled back/));
      await client.query("ROLLBACK");

      const begin = client.query("BEGIN");
      const inFlight = await docket.enqueue("t", { n: 4 }, { transaction: client });
      await begin;
      await client.query("ROLLBACK");
      expect(await docket.get(inFlight.id)).toBeNull();
      expect((await docket.list()).map((j) => j.id)).toEqual([kept.id]);
    } finally {
      await client.end();
      await adapter.close();
    }
  });
});
