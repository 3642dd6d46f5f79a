import { sql } from "kysely";
import { afterAll, describe, expect, it } from "vitest";
import { Docket } from "../src/client/docket.ts";
import { postgresAdapter } from "../src/adapters/postgres/index.ts";
import { postgresBinDir, startPrivatePostgres } from "./support/private-postgres.ts";
import { openTarget, REQUIRE_ALL } from "./support/targets.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `docket.health()`: the oldest open transaction the database shows and the
 * dead row versions of docket's tables (PostgreSQL), or the purge backlog
 * (MariaDB), read while an application session holds a snapshot open;
 * whether autovacuum runs for docket's tables (PostgreSQL); null where the
 * adapter has nothing to report.
 */
describe("docket.health()", async () => {
  for (const name of ["postgres", "mysql"] as const) {
    const target = await openTarget(name);
    afterAll(() => target?.dispose());
    describe.skipIf(!target)(name, () => {
      it("reports a snapshot held open elsewhere by its age, and docket's tables' dead rows or the purge backlog", async () => {
        const store = await target!.open();
        const adapter = await store.connect();
        const docket = new Docket({ adapter });
        const app = await store.application!();
        try {
          await docket.migrate();
          const quiet = (await docket.health())!;
          const jobs = await docket.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ task: "t", payload: { i } })));
          // A snapshot held from its first read on, as a forgotten session or a long report holds one.
          await app.db.transaction().setIsolationLevel("repeatable read").execute(async (trx) => {
            await trx.selectFrom(`${store.tablePrefix}jobs`).select("id").limit(1).execute();
            await sleep(600);
            for (const job of jobs) await docket.cancel(job.id);
            const held = (await docket.health())!;
            console.log(`${name} health while a snapshot is held 600 ms: ${JSON.stringify(held)} (before: ${JSON.stringify(quiet)})`);
            expect(held.oldestTransactionAgeMs).toBeGreaterThanOrEqual(500);
            if (name === "postgres") {
              expect(held.deadRows!.map((r) => r.table)).toContain(`${store.tablePrefix}jobs`);
              expect(held.purgeBacklog).toBeNull();
            } else {
              expect(held.deadRows).toBeNull();
              expect(held.purgeBacklog).toEqual(expect.any(Number));
              expect(held.autovacuum).toBeNull();
            }
          });
          if (name === "postgres") {
            // The server's switch as the server reports it (this machine's shared server may run without autovacuum), then one table's own.
            const server = await sql<{ on: boolean }>`select current_setting('autovacuum')::boolean and current_setting('track_counts')::boolean as "on"`.execute(app.db);
            expect((await docket.health())!.autovacuum).toBe(server.rows[0]!.on);
            await sql`alter table ${sql.table(`${store.tablePrefix}jobs`)} set (autovacuum_enabled = false)`.execute(app.db);
            expect((await docket.health())!.autovacuum).toBe(false);
          }
        } finally {
          await app.close();
          await adapter.close();
          await store.close();
        }
      });
    });
  }

  // The shared server may run without autovacuum (this machine's does): on one this test owns, with the defaults, it is on.
  it.skipIf(!postgresBinDir() && !REQUIRE_ALL)("postgres: autovacuum is reported on with the server's defaults, and off once a docket table turns it off", async () => {
    const server = await startPrivatePostgres();
    const adapter = postgresAdapter({ connectionString: server.url, tablePrefix: "h_" });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      expect((await docket.health())!.autovacuum).toBe(true);
      const pg = (await import("pg")).default;
      const admin = new pg.Client({ connectionString: server.url });
      await admin.connect();
      await admin.query("alter table h_jobs set (autovacuum_enabled = false)");
      await admin.end();
      expect((await docket.health())!.autovacuum).toBe(false);
    } finally {
      await adapter.close();
      await server.destroy();
    }
  });

  it("is null on SQLite and the in-memory adapter", async () => {
    for (const name of ["sqlite", "memory"] as const) {
      const target = (await openTarget(name))!;
      const store = await target.open();
      const adapter = await store.connect();
      try {
        const docket = new Docket({ adapter });
        await docket.migrate();
        expect(await docket.health()).toBeNull();
      } finally {
        await adapter.close();
        await store.close();
        await target.dispose();
      }
    }
  });
});
