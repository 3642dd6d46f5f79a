import { afterAll, describe, expect, it } from "vitest";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import type { ReadyNotice } from "../../src/core/adapter.ts";
import type { Engine } from "../../src/adapters/kysely/engine.ts";
import { Docket } from "../../src/index.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../support/targets.ts";
import { until } from "../support/until.ts";

const created = await createPgTestDatabase("docket_notice_window", "the postgres notice window tests");
const url = created?.url ?? null;
afterAll(async () => {
  if (created) await dropPgDatabase(PG_URL, created.database);
});

/** A window long enough that every enqueue of one test falls in it, whatever the machine's speed. */
const WINDOW_MS = 2_000;

/**
 * The store's own enqueues send at most one ready notice per queue per
 * window (notice-window.ts; PostgreSQL serializes the commits that NOTIFY),
 * and a job stored without one is announced when the window ends: an idle
 * worker in another process (an hour's pollMs) still starts it.
 */
describe.skipIf(!url)("postgres: the store's ready notices per window", () => {
  it("a burst of 100 single enqueues sends one notice, and the window's end announces the jobs stored after it to an idle worker elsewhere", async () => {
    const window = { instrument: { wrapEngine: (e: Engine): Engine => ({ ...e, noticeWindowMs: WINDOW_MS }) } };
    const listening = postgresAdapter({ connectionString: url!, tablePrefix: "w1_" });
    const producing = postgresAdapter({ connectionString: url!, tablePrefix: "w1_", ...window });
    const producer = new Docket({ adapter: producing });
    const consumer = new Docket({ adapter: listening });
    await producer.migrate();
    const notices: ReadyNotice[] = [];
    const unsubscribe = listening.onReady!((n) => void (n.queue === "burst" && notices.push(n)));
    const started: number[] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const w = consumer.worker({
      queues: ["burst"],
      concurrency: 2,
      pollMs: 3_600_000,
      logger: null,
      handlers: { first: () => held, later: () => undefined },
      onEvent: (e) => void (e.type === "started" && started.push(e.job.id)),
    });
    await w.start();
    try {
      // Let the worker poll once and go idle with its notices subscribed.
      await new Promise((r) => setTimeout(r, 300));
      const first = await producer.enqueue("first", {}, { queue: "burst" });
      // The first job's notice wakes the worker; it claims that job (it is the only one) and goes idle again.
      await until(() => started.includes(first.id), 5_000, "the idle worker started the job whose enqueue carried the notice");
      const burst = await Promise.all(Array.from({ length: 100 }, () => producer.enqueue("later", {}, { queue: "burst" })));
      // Within the window: no notice of their own; the window's end sends one, and the worker starts them all.
      await until(() => burst.every((j) => started.includes(j.id)), 10_000, "the idle worker started the jobs announced at the window's end");
      await new Promise((r) => setTimeout(r, 300));
      expect(notices.length).toBe(2);
    } finally {
      release();
      unsubscribe();
      await w.stop();
      await listening.close();
      await producing.close();
    }
  }, 30_000);

  it("a store that closes within a window sends the notice it owes", async () => {
    const window = { instrument: { wrapEngine: (e: Engine): Engine => ({ ...e, noticeWindowMs: 60_000 }) } };
    const listening = postgresAdapter({ connectionString: url!, tablePrefix: "w2_" });
    const producing = postgresAdapter({ connectionString: url!, tablePrefix: "w2_", ...window });
    try {
      const producer = new Docket({ adapter: producing });
      await producer.migrate();
      const notices: ReadyNotice[] = [];
      const unsubscribe = listening.onReady!((n) => void (n.queue === "owed" && notices.push(n)));
      await new Promise((r) => setTimeout(r, 300));
      await producer.enqueue("t", {}, { queue: "owed" });
      await producer.enqueue("t", {}, { queue: "owed" });
      await until(() => notices.length === 1, 5_000, "the first enqueue's notice");
      await producing.close();
      await until(() => notices.length === 2, 5_000, "the notice the closing store owed the second enqueue");
      unsubscribe();
    } finally {
      await listening.close();
      await producing.close();
    }
  }, 30_000);
});
