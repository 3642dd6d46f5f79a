import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import type { WorkerEvent } from "../../worker/index.ts";
import type { ConformanceCase } from "../harness.ts";
import { eventually, sleep } from "./helpers.ts";

export const workerLeaseCases: ConformanceCase[] = [
  {
    // A stop's grace period may outlast the lease: the worker must keep the lease alive until the handler returns.
    name: "worker › a stopping worker keeps heartbeating a handler that ignores its signal: no reclaim, no second run, no key overlap",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter, retry: { baseMs: 5, jitter: 0 } });
      const sweeperAdapter = await t.connect();
      const sweeper = new Docket({ adapter: sweeperAdapter, retry: { baseMs: 5, jitter: 0 } });
      const concurrency = { key: "user:1", limit: 1 };
      const first = await d.enqueue("slow", { n: 1 }, { concurrency });
      const second = await d.enqueue("slow", { n: 2 }, { concurrency });
      assert.equal(second.state, "blocked");
      const runs: number[] = [];
      let active = 0;
      let maxActive = 0;
      const slow = async (p: unknown) => {
        runs.push((p as { n: number }).n);
        maxActive = Math.max(maxActive, ++active);
        await sleep(1_200); // ignores its signal
        active--;
      };
      const events: WorkerEvent[] = [];
      const opts = { leaseMs: 600, heartbeatMs: 150, reclaimMs: 50, pollMs: 10, logger: null };
      const a = d.worker({ ...opts, shutdownTimeoutMs: 2_000, handlers: { slow }, onEvent: (e) => events.push(e) });
      await a.start();
      await eventually(async () => runs.length === 1, 5_000, "the first job started on worker A");
      const b = sweeper.worker({ ...opts, handlers: { slow } });
      await b.start();
      await a.stop();
      await eventually(async () => (await d.get(second.id))?.state === "succeeded", 10_000, "the second job ran after the first");
      await b.stop();
      assert.deepEqual(runs, [1, 2], "each job ran once, in order");
      assert.equal(maxActive, 1, "two jobs of a limit-1 key never ran at once");
      const done = await d.get(first.id);
      assert.equal(done?.state, "succeeded");
      assert.equal(done?.attempt, 1, "the first job's attempt was never reclaimed");
      assert.deepEqual(events.filter((e) => e.type === "succeeded" || e.type === "lost").map((e) => e.type), ["succeeded"]);
    },
  },
  {
    // In-flight attempts are told apart by lease token, not job id: a stale attempt must not erase a fresh one of the same job.
    name: "worker › a job re-claimed by the same worker while its stale attempt still runs: the stale one is lost, the fresh one completes",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter, retry: { baseMs: 5, jitter: 0 } });
      const job = await d.enqueue("twice", {});
      let releaseFirst!: () => void;
      const firstMayEnd = new Promise<void>((r) => (releaseFirst = r));
      let releaseSecond!: () => void;
      const secondMayEnd = new Promise<void>((r) => (releaseSecond = r));
      const events: WorkerEvent[] = [];
      const w = d.worker({
        // No heartbeat during the case: the stale attempt is not noticed before it ends.
        leaseMs: 60_000,
        heartbeatMs: 50_000,
        reclaimMs: 50_000,
        pollMs: 10,
        concurrency: 2,
        logger: null,
        handlers: {
          twice: async (_p, ctx) => {
            if (ctx.job.attempt === 1) await firstMayEnd;
            else await Promise.race([secondMayEnd, sleep(2_000)]);
          },
        },
        onEvent: (e) => {
          events.push(e);
          if (e.type === "started" && e.job.attempt === 2) releaseFirst();
          if (e.type === "lost") releaseSecond();
        },
      });
      await w.start();
      await eventually(async () => events.some((e) => e.type === "started"), 5_000, "first attempt started");
      const held = (await d.get(job.id))!;
      // Another process's sweep finds the lease expired (its clock is past the expiry) and retries the job now.
      const expired = await t.adapter.expire({
        id: job.id,
        leaseToken: held.leaseToken!,
        now: held.leaseExpiresAt!,
        error: "forced expiry",
        retryAt: Date.now() - 1_000,
      });
      assert.equal(expired?.state, "scheduled");
      await eventually(async () => (await d.get(job.id))?.state === "succeeded", 10_000, "the fresh attempt completed");
      await w.stop();
      const done = await d.get(job.id);
      assert.equal(done?.attempt, 2);
      const outcomes = events.filter((e) => e.type === "succeeded" || e.type === "lost").map((e) => `${e.type}@${e.job.attempt}`);
      assert.deepEqual(outcomes, ["lost@1", "succeeded@2"]);
      assert.equal(w.inFlight, 0);
    },
  },
];
