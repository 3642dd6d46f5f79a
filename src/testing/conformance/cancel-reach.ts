import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import type { WorkerEvent } from "../../worker/index.ts";
import type { ConformanceCase } from "../harness.ts";
import { eventually } from "./helpers.ts";

const HOUR = 3_600_000;

/** A cancel reaches a running handler quickly, not at the next heartbeat (leaseMs / 3 later). */
export const cancelReachCases: ConformanceCase[] = [
  {
    name: "cancel › a cancel through the worker's own docket has aborted the running handler's signal when it returns",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter });
      let signal: AbortSignal | null = null;
      const events: WorkerEvent[] = [];
      // Heartbeats every 20 minutes and a one-hour poll: only the cancel itself can reach the handler.
      const w = d.worker({
        leaseMs: HOUR,
        pollMs: HOUR,
        logger: null,
        onEvent: (e) => void events.push(e),
        handlers: { long: (_p, ctx) => new Promise<void>((resolve) => ((signal = ctx.signal), ctx.signal.addEventListener("abort", () => resolve()))) },
      });
      const job = await d.enqueue("long", {});
      await w.start();
      try {
        await eventually(async () => signal !== null, 10_000, "the handler started");
        await d.cancel(job.id);
        assert.equal(signal!.aborted, true, "aborted by the time cancel() returned");
        await eventually(async () => events.some((e) => e.type === "lost" && e.job.id === job.id), 5_000, "a lost event");
      } finally {
        await w.stop();
      }
    },
  },
  {
    name: "cancel › a cancel from another connection aborts the running handler at the worker's next lease check, long before its next heartbeat",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter });
      const other = new Docket({ adapter: await t.connect() });
      let signal: AbortSignal | null = null;
      const w = d.worker({
        leaseMs: HOUR,
        pollMs: HOUR,
        logger: null,
        handlers: { long: (_p, ctx) => new Promise<void>((resolve) => ((signal = ctx.signal), ctx.signal.addEventListener("abort", () => resolve()))) },
      });
      const job = await d.enqueue("long", {});
      await w.start();
      try {
        await eventually(async () => signal !== null, 10_000, "the handler started");
        await other.cancel(job.id);
        await eventually(async () => signal!.aborted, 10_000, "the handler's signal aborted (the next heartbeat is 20 minutes away)");
      } finally {
        await w.stop();
      }
    },
  },
  {
    name: "cancel › a prefetched job cancelled through the worker's own docket never starts",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter });
      const started: number[] = [];
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const w = d.worker({
        concurrency: 1,
        prefetch: 5,
        leaseMs: HOUR,
        pollMs: HOUR,
        logger: null,
        handlers: { t: async (_p, ctx) => void (started.push(ctx.job.id), started.length === 1 && (await gate)) },
      });
      const jobs = [];
      for (let i = 0; i < 3; i++) jobs.push(await d.enqueue("t", { i }));
      await w.start();
      try {
        await eventually(async () => started.length === 1 && w.inFlight === 3, 10_000, "one running, two buffered");
        const buffered = jobs.find((j) => !started.includes(j.id))!;
        await d.cancel(buffered.id);
        release();
        await eventually(async () => started.length === 2, 10_000, "the other buffered job ran");
        await new Promise((r) => setTimeout(r, 100));
        assert.ok(!started.includes(buffered.id), "the cancelled buffered job never started");
      } finally {
        await w.stop();
      }
    },
  },
];
