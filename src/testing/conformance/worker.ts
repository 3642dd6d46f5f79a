import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import type { WorkerEvent } from "../../worker/index.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { eventually, sleep } from "./helpers.ts";

/** A docket on real time: workers heartbeat and sweep on real timers. */
function realTime(t: CaseContext, retry = { baseMs: 5, jitter: 0 }): Docket {
  return new Docket({ adapter: t.adapter, retry });
}

const FAST = { pollMs: 10, leaseMs: 400, heartbeatMs: 50, reclaimMs: 50, logger: null };

export const workerCases: ConformanceCase[] = [
  {
    name: "worker › runs every job once and records success",
    slow: true,
    async run(t) {
      const d = realTime(t);
      await d.enqueueMany(Array.from({ length: 30 }, (_, i) => ({ task: "add", payload: i })));
      const seen: number[] = [];
      const events: WorkerEvent[] = [];
      const w = d.worker({ ...FAST, concurrency: 4, handlers: { add: async (p) => void seen.push(p as number) }, onEvent: (e) => events.push(e) });
      await w.start();
      await eventually(async () => (await d.list({ state: "succeeded" })).length === 30, 10_000, "30 jobs succeeded");
      await w.stop();
      assert.deepEqual([...seen].sort((a, b) => a - b), Array.from({ length: 30 }, (_, i) => i));
      assert.equal(events.filter((e) => e.type === "succeeded").length, 30);
    },
  },
  {
    name: "worker › a handler that throws a string, undefined or an Error is a failed attempt with the reason stored",
    slow: true,
    async run(t) {
      const d = realTime(t);
      const thrown: unknown[] = ["plain string", undefined, new TypeError("typed"), { code: 7 }];
      const jobs = await d.enqueueMany(thrown.map((_, i) => ({ task: "boom", payload: i, options: { maxAttempts: 1 } })));
      const w = d.worker({ ...FAST, handlers: { boom: async (i) => { throw thrown[i as number]; } } });
      await w.start();
      await eventually(async () => (await d.deadLetters.list()).length === thrown.length, 10_000, "all jobs dead");
      await w.stop();
      const reasons = await Promise.all(jobs.map(async (j) => (await d.get(j.id))?.lastError ?? ""));
      assert.match(reasons[0]!, /plain string/);
      assert.match(reasons[1]!, /undefined/);
      assert.match(reasons[2]!, /TypeError: typed/);
      assert.match(reasons[3]!, /"code":7/);
    },
  },
  {
    name: "worker › stop() aborts handlers, then releases unfinished jobs back to ready without spending an attempt",
    slow: true,
    async run(t) {
      const d = realTime(t);
      const polite = await d.enqueue("polite", {});
      const stubborn = await d.enqueue("stubborn", {});
      let started = 0;
      const w = d.worker({
        ...FAST,
        handlers: {
          polite: (_p, ctx) => new Promise((_, reject) => { started++; ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason)); }),
          stubborn: () => new Promise(() => void started++),
        },
      });
      await w.start();
      await eventually(async () => started === 2, 5_000, "both handlers started");
      await w.stop({ timeoutMs: 100 });
      for (const id of [polite.id, stubborn.id]) {
        const job = await d.get(id);
        assert.equal(job?.state, "ready");
        assert.equal(job?.attempt, 0);
        assert.equal(job?.leaseToken, null);
      }
      assert.equal(w.inFlight, 0);
    },
  },
  {
    name: "worker › cancelling a running job aborts its handler and no success is recorded",
    slow: true,
    async run(t) {
      const d = realTime(t);
      const job = await d.enqueue("long", {});
      let aborted = false;
      const events: WorkerEvent[] = [];
      const w = d.worker({
        ...FAST,
        onEvent: (e) => events.push(e),
        handlers: {
          long: (_p, ctx) => new Promise((resolve) => ctx.signal.addEventListener("abort", () => { aborted = true; resolve(undefined); })),
        },
      });
      await w.start();
      await eventually(async () => (await d.get(job.id))?.state === "running", 5_000, "job running");
      await d.cancel(job.id);
      await eventually(async () => aborted, 5_000, "handler aborted");
      await sleep(50);
      await w.stop();
      assert.equal((await d.get(job.id))?.state, "cancelled");
      assert.equal(events.filter((e) => e.type === "succeeded").length, 0);
    },
  },
  {
    name: "worker › a job held by a crashed worker is reclaimed after its lease and run by another worker",
    slow: true,
    async run(t) {
      const d = realTime(t);
      const job = await d.enqueue("t", {});
      const now = Date.now();
      // The "crashed" worker: claims with a short lease and then never heartbeats.
      const [held] = await t.adapter.claim({ queues: ["default"], limit: 1, now, leaseToken: "crashed", leaseExpiresAt: now + 200 });
      assert.equal(held?.id, job.id);
      let ran = 0;
      const w = d.worker({ ...FAST, handlers: { t: async () => void ran++ } });
      await w.start();
      await eventually(async () => (await d.get(job.id))?.state === "succeeded", 10_000, "job succeeded");
      await w.stop();
      const done = await d.get(job.id);
      assert.equal(ran, 1);
      assert.equal(done?.attempt, 2, "the crashed attempt counts");
    },
  },
  {
    name: "worker › each attempt emits exactly one outcome event, even with heartbeats racing completions (I6)",
    slow: true,
    async run(t) {
      const d = realTime(t);
      await d.enqueueMany(Array.from({ length: 60 }, (_, i) => ({ task: "quick", payload: i })));
      // Per attempt (job id and attempt number): on a starved machine a 400 ms lease can end before a heartbeat
      // renews it, and then that attempt is lost (one event) and a later one of the job succeeds (one event).
      const outcomes = new Map<string, string[]>();
      const succeeded = new Set<number>();
      const w = d.worker({
        ...FAST,
        heartbeatMs: 10,
        concurrency: 6,
        handlers: { quick: () => sleep(Math.random() * 8) },
        onEvent: (e) => {
          if (e.type === "succeeded" || e.type === "lost" || e.type === "retry" || e.type === "dead") {
            const key = `job ${e.job.id} attempt ${e.job.attempt}`;
            outcomes.set(key, [...(outcomes.get(key) ?? []), e.type]);
            if (e.type === "succeeded") succeeded.add(e.job.id);
          }
        },
      });
      await w.start();
      await eventually(async () => (await d.list({ state: "succeeded" })).length === 60, 20_000, "60 jobs succeeded");
      await w.stop();
      for (const [key, events] of outcomes) assert.equal(events.length, 1, `${key} emitted ${events.join(", ")}`);
      assert.equal(succeeded.size, 60, "each job reported succeeded once");
      assert.equal([...outcomes.values()].filter((events) => events[0] === "succeeded").length, 60, "one succeeded event per job");
    },
  },
];
