import { afterAll, describe, expect, it } from "vitest";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import type { ReadyNotice } from "../../src/core/adapter.ts";
import { Docket } from "../../src/index.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../support/targets.ts";
import { until } from "../support/until.ts";

const created = await createPgTestDatabase("docket_notify", "the postgres LISTEN/NOTIFY tests");
const url = created?.url ?? null;
afterAll(async () => {
  if (created) await dropPgDatabase(PG_URL, created.database);
});

/**
 * Issue 9 item 4: on PostgreSQL an idle worker is woken by NOTIFY when a job
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

      const consumer = new Docket({ adapter: a });
      const started: number[] = [];
      let failNext = true;
      const handlers = {
        t: () => undefined,
        flaky: () => {
          if (failNext) {
            failNext = false;
            throw new Error("first attempt fails");
          }
        },
      };
      const w = consumer.worker({ handlers, pollMs: 3_600_000, logger: null, onEvent: (e) => void (e.type === "started" && started.push(e.job.id)) });
      await w.start();
      // Let the worker poll once and go idle with its listener up.
      await new Promise((r) => setTimeout(r, 300));
      const job = await producer.enqueue("t", {});
      await until(() => started.includes(job.id), 5_000, "the idle worker started a job enqueued by another adapter");
      const flaky = await producer.enqueue("flaky", {}, { maxAttempts: 1 });
      await until(async () => (await producer.get(flaky.id))?.state === "dead", 5_000, "the flaky job is dead");
      // Replayed elsewhere, the job is scheduled and due: the notice makes the idle worker stage and run it.
      await producer.deadLetters.replay(flaky.id);
      await until(async () => (await producer.get(flaky.id))?.state === "succeeded", 5_000, "the replayed job ran");
      await w.stop();
    } finally {
      await a.close();
      await b.close();
    }
  }, 30_000);
});
