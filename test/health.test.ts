import { afterAll, describe, expect, it } from "vitest";
import { Docket } from "../src/client/docket.ts";
import { openTarget } from "./support/targets.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `docket.health()`: the oldest open transaction the database shows and the
 * dead row versions of docket's tables (PostgreSQL), or the purge backlog
 * (MariaDB), read while an application session holds a snapshot open; null
 * where the adapter has nothing to report.
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
            }
          });
        } finally {
          await app.close();
          await adapter.close();
          await store.close();
        }
      });
    });
  }

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
