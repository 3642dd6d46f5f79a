import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { sqliteAdapter } from "../../src/adapters/sqlite/index.ts";
import type { ReadyNotice } from "../../src/core/adapter.ts";
import { Docket, InvalidArgumentError } from "../../src/index.ts";
import { until } from "../support/until.ts";
import { idleWorkerWakesForFreedCapSlot, idleWorkerWakesForOtherConnection } from "../support/wake.ts";

/** Two stores on one fresh file, as two processes would open it: `worker` side and `producer` side. */
async function withTwoStores(fn: (consumer: Docket, producer: Docket, file: string) => Promise<void>, commitCheckMs?: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "docket-watch-"));
  const file = join(dir, "jobs.db");
  const a = sqliteAdapter({ filename: file, ...(commitCheckMs === undefined ? {} : { commitCheckMs }) });
  const b = sqliteAdapter({ filename: file });
  try {
    const producer = new Docket({ adapter: b });
    await producer.migrate();
    await fn(new Docket({ adapter: a }), producer, file);
  } finally {
    await a.close();
    await b.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * On SQLite, which has no NOTIFY: an idle worker hears of a
 * job another connection to the file committed (another process, here
 * another adapter) from the file's data version, long before its next poll
 * (pollMs one hour).
 */
describe("sqlite: other connections' commits wake idle workers", () => {
  it("another connection's commit reaches onReady as {queue: null, due: true}", () =>
    withTwoStores(async (consumer, producer) => {
      const notices: ReadyNotice[] = [];
      const unsubscribe = consumer.adapter.onReady!((n) => notices.push(n));
      await consumer.adapter.get({ id: 0 }); // opens the file
      await new Promise((r) => setTimeout(r, 60));
      await producer.enqueue("t", {});
      await until(() => notices.length > 0, 2_000, "a notice after another connection's commit");
      expect(notices[0]).toEqual({ queue: null, due: true });
      unsubscribe();
    }));

  it("an idle worker with an hour's poll starts a job enqueued, and a job replayed, through another connection", () =>
    withTwoStores(async (consumer, producer) => {
      await idleWorkerWakesForOtherConnection(consumer, producer);
    }));

  it("an idle worker with an hour's poll starts a capped queue's job when another connection's worker frees the cap's slot", () =>
    withTwoStores(async (consumer, producer) => {
      await idleWorkerWakesForFreedCapSlot(consumer, producer);
    }));

  it("commitCheckMs 0 turns the checks off; a bad value is refused", async () => {
    await withTwoStores(async (consumer) => {
      expect(consumer.adapter.onReady).toBeUndefined();
    }, 0);
    for (const bad of [-1, 1.5, Number.NaN]) {
      expect(() => sqliteAdapter({ filename: ":memory:", commitCheckMs: bad })).toThrow(InvalidArgumentError);
    }
  });
});
