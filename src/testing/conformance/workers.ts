import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import { WORKER_ROWS_KEPT_MS, type WorkerRecord } from "../../core/adapter.ts";
import type { ConformanceCase } from "../harness.ts";
import { eventually, sleep } from "./helpers.ts";

const row = (id: string, name: string, at: number, over: Partial<WorkerRecord> = {}): WorkerRecord => ({
  id,
  name,
  host: "h1",
  pid: 42,
  queues: JSON.stringify(["default"]),
  concurrency: 10,
  startedAt: at,
  heartbeatAt: at,
  expiresAt: at + 30_000,
  jobsInHand: 0,
  ...over,
});

/** The worker registry (DocketAdapter.putWorker, listWorkers, removeWorker; Docket.workers). */
export const workerRegistryCases: ConformanceCase[] = [
  {
    name: "workers › a row is listed until it expires, by name; a heartbeat replaces it; a removed one is gone",
    async run(t) {
      const a = t.adapter;
      const now = t.clock.now();
      await a.putWorker(row("b#1", "b", now));
      await a.putWorker(row("a#1", "a", now, { queues: JSON.stringify(["q1", "q2"]), jobsInHand: 3, expiresAt: now + 10_000 }));
      assert.deepEqual((await a.listWorkers({ now, limit: 10 })).map((w) => w.id), ["a#1", "b#1"]);
      const [first] = await a.listWorkers({ now, limit: 1 });
      assert.deepEqual(first, row("a#1", "a", now, { queues: JSON.stringify(["q1", "q2"]), jobsInHand: 3, expiresAt: now + 10_000 }));
      await a.putWorker(row("a#1", "a", now, { heartbeatAt: now + 5_000, expiresAt: now + 35_000, jobsInHand: 7 }));
      const beat = (await a.listWorkers({ now: now + 20_000, limit: 10 })).map((w) => [w.id, w.jobsInHand, w.heartbeatAt]);
      assert.deepEqual(beat, [["a#1", 7, now + 5_000], ["b#1", 0, now]], "a heartbeat replaces the row; nothing expired yet");
      assert.deepEqual((await a.listWorkers({ now: now + 30_000, limit: 10 })).map((w) => w.id), ["a#1"], "b expired at its expiry (a crashed worker)");
      await a.removeWorker({ id: "a#1" });
      await a.removeWorker({ id: "never-registered" });
      assert.deepEqual(await a.listWorkers({ now: now + 30_000, limit: 10 }), [], "a removed worker is gone; b stays expired");
    },
  },
  {
    name: "workers › a registration deletes rows that expired over an hour before it (crashed workers' rows do not pile up)",
    async run(t) {
      const a = t.adapter;
      const now = t.clock.now();
      await a.putWorker(row("old#1", "old", now));
      await a.putWorker(row("new#1", "new", now + 30_000 + WORKER_ROWS_KEPT_MS - 1));
      await a.removeWorker({ id: "new#1" });
      await a.putWorker(row("new#2", "new", now + 30_000 + WORKER_ROWS_KEPT_MS + 1));
      // Listed as of the old row's own time: it would show were it still stored.
      assert.deepEqual((await a.listWorkers({ now, limit: 10 })).map((w) => w.id), ["new#2"]);
    },
  },
  {
    name: "workers › a running worker registers with its queues, concurrency and jobs in hand, and unregisters when it stops",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter });
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      const w = d.worker({ name: "registry-test", queues: ["reg"], concurrency: 3, leaseMs: 3_000, pollMs: 20, logger: null, handlers: { t: () => held } });
      await d.enqueue("t", {}, { queue: "reg" });
      await w.start();
      try {
        await eventually(async () => (await d.workers()).some((x) => x.jobsInHand === 1), 5_000, "the worker's row with its job in hand");
        const [me] = await d.workers();
        assert.equal(me!.name, "registry-test");
        assert.match(me!.id, /^registry-test#/);
        assert.deepEqual([me!.queues, me!.concurrency, me!.expiresAt - me!.heartbeatAt], [["reg"], 3, 3_000]);
        assert.ok(me!.pid > 0 && me!.host.length > 0);
      } finally {
        release();
        await w.stop();
      }
      await sleep(10);
      assert.deepEqual(await d.workers(), [], "a stopped worker is gone at once");
    },
  },
];
