import { afterAll, describe, expect, it } from "vitest";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import type { ReadyNotice } from "../../src/core/adapter.ts";
import { Docket } from "../../src/index.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../support/targets.ts";
import { until } from "../support/until.ts";
import { idleWorkerWakesForFreedCapSlot, idleWorkerWakesForOtherConnection } from "../support/wake.ts";

const created = await createPgTestDatabase("docket_notify", "the postgres LISTEN/NOTIFY tests");
const url = created?.url ?? null;
afterAll(async () => {
  if (created) await dropPgDatabase(PG_URL, created.database);
});

/**
 * On PostgreSQL an idle worker is woken by NOTIFY when a job
 * becomes ready in another process (here: another adapter, its own pool),
 * long before its next poll (pollMs one hour).
 */
describe.skipIf(!url)("postgres: LISTEN/NOTIFY wake-ups", () => {
  it("an enqueue, a replay and a reconnect reach onReady; an idle worker with an hour's poll starts a job enqueued elsewhere", async () => {
    const a = postgresAdapter({ connectionString: url!, tablePrefix: "n1_" });
    const b = postgresAdapter({ connectionString: url!, tablePrefix: "n1_" });
    try {
      const producer = new Docket({ adapter: b });
      await producer.migrate();
      const notices: ReadyNotice[] = [];
      const unsubscribe = a.onReady!((n) => notices.push(n));
      // The first notice after (re)connecting is {queue: null}: notices sent meanwhile were lost.
      await until(() => notices.length > 0, 5_000, "the listener connected");
      expect(notices[0]).toEqual({ queue: null, due: true });
      await producer.enqueue("t", {}, { queue: "mail" });
      await until(() => notices.some((n) => n.queue === "mail" && !n.due), 5_000, "a ready notice for mail");
      unsubscribe();

      await idleWorkerWakesForOtherConnection(new Docket({ adapter: a }), producer);
    } finally {
      await a.close();
      await b.close();
    }
  }, 30_000);

  it("an idle worker with an hour's poll starts a capped queue's job when another connection's worker frees the cap's slot", async () => {
    const a = postgresAdapter({ connectionString: url!, tablePrefix: "n2_" });
    const b = postgresAdapter({ connectionString: url!, tablePrefix: "n2_" });
    try {
      const producer = new Docket({ adapter: b });
      await producer.migrate();
      await idleWorkerWakesForFreedCapSlot(new Docket({ adapter: a }), producer);
    } finally {
      await a.close();
      await b.close();
    }
  }, 30_000);
});
