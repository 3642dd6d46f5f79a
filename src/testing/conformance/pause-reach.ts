import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import type { WorkerEvent } from "../../worker/index.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { eventually } from "./helpers.ts";

const HOUR = 3_600_000;

/**
 * A worker running one job of queue "q" (held until `release`), with the
 * other two of the queue's three jobs in its buffer; its events and the
 * jobs that started.
 */
async function oneRunningTwoBuffered(t: CaseContext, d: Docket) {
  const started: number[] = [];
  const events: WorkerEvent[] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const w = d.worker({
    queues: ["q"],
    concurrency: 1,
    prefetch: 5,
    leaseMs: HOUR,
    pollMs: HOUR,
    logger: null,
    onEvent: (e) => void events.push(e),
    handlers: { t: async (_p, ctx) => void (started.push(ctx.job.id), started.length === 1 && (await gate)) },
  });
  const jobs = [];
  for (let i = 0; i < 3; i++) jobs.push(await d.enqueue("t", { i }, { queue: "q" }));
  await w.start();
  await eventually(async () => started.length === 1 && w.inFlight === 3, 10_000, "one running, two buffered");
  return { w, jobs, started, events, release };
}

/** Once a queue is paused, jobs a worker prefetched from it do not start: they go back to ready, their attempt not counted. */
export const pauseReachCases: ConformanceCase[] = [
  {
    name: "pause › once pauseQueue through the worker's own docket returns, no job the worker prefetched from the queue starts; they go back to ready unattempted and run after resumeQueue",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter });
      const { w, jobs, started, events, release } = await oneRunningTwoBuffered(t, d);
      try {
        await d.pauseQueue("q");
        release();
        const buffered = jobs.filter((j) => j.id !== started[0]);
        await eventually(async () => (await Promise.all(buffered.map((j) => t.adapter.get({ id: j.id })))).every((j) => j?.state === "ready" && j.attempt === 0), 10_000, "the buffered jobs back to ready, unattempted");
        await new Promise((r) => setTimeout(r, 100));
        assert.deepEqual(started.length, 1, "no buffered job started after the pause");
        assert.equal(events.filter((e) => e.type === "released").length, 2, "two released events");
        await d.resumeQueue("q");
        await eventually(async () => started.length === 3, 10_000, "both ran after the resume");
      } finally {
        release();
        await w.stop();
      }
    },
  },
  {
    name: "pause › a pause from another connection keeps the worker's prefetched jobs from starting within about a second",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter });
      const other = new Docket({ adapter: await t.connect() });
      const { w, jobs, started, release } = await oneRunningTwoBuffered(t, d);
      try {
        await other.pauseQueue("q");
        const buffered = jobs.filter((j) => j.id !== started[0]);
        // The worker's poll is an hour away: only its read of the controls can learn the pause.
        await eventually(async () => (await Promise.all(buffered.map((j) => t.adapter.get({ id: j.id })))).every((j) => j?.state === "ready"), 5_000, "the buffered jobs back to ready");
        release();
        await new Promise((r) => setTimeout(r, 200));
        assert.equal(started.length, 1, "no buffered job started after the pause");
      } finally {
        release();
        await w.stop();
      }
    },
  },
];
