import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import type { WorkerEvent } from "../../worker/index.ts";
import type { ConformanceCase } from "../harness.ts";
import { claim, eventually, insert, sleep } from "./helpers.ts";
import { settleOne } from "../lease-writes.ts";

const code = (c: string) => (e: { code?: string }) => e.code === c;

/** Results, progress and waiting for a job. */
export const resultCases: ConformanceCase[] = [
  {
    name: "results › a handler's return value is stored with the succeeded job: get, the succeeded event and waitFor return it; undefined stores null",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter });
      const events: WorkerEvent[] = [];
      const w = d.worker({
        pollMs: 20,
        logger: null,
        handlers: { sum: (p) => ({ total: (p as number[]).reduce((a, b) => a + b, 0), note: "ok" }), nothing: () => undefined },
        onEvent: (e) => void events.push(e),
      });
      const sum = await d.enqueue("sum", [1, 2, 3]);
      const nothing = await d.enqueue("nothing", {});
      await w.start();
      try {
        const done = await d.waitFor(sum.id, { timeoutMs: 10_000, pollMs: 10 });
        assert.equal(done.state, "succeeded");
        assert.deepEqual(done.result, { total: 6, note: "ok" });
        assert.deepEqual((await d.get(sum.id))?.result, { total: 6, note: "ok" });
        assert.equal((await d.waitFor(nothing.id, { timeoutMs: 10_000, pollMs: 10 })).result, null);
        // The event follows the committed write: waitFor can see the row first.
        const isSumSucceeded = (e: WorkerEvent) => e.type === "succeeded" && e.job.id === sum.id;
        await eventually(async () => events.some(isSumSucceeded), 10_000, "the succeeded event of the sum job");
        const event = events.find(isSumSucceeded);
        assert.ok(event && event.type === "succeeded");
        assert.deepEqual(event.job.result, { total: 6, note: "ok" });
      } finally {
        await w.stop();
      }
    },
  },
  {
    name: "results › a return value that cannot be stored (a bigint, or over maxPayloadBytes) fails the attempt with the reason",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter, maxPayloadBytes: 100 });
      const w = d.worker({ pollMs: 20, logger: null, handlers: { big: () => "x".repeat(200), bigint: () => ({ n: 1n }) } });
      const big = await d.enqueue("big", {}, { maxAttempts: 1 });
      const bigint = await d.enqueue("bigint", {}, { maxAttempts: 1 });
      await w.start();
      try {
        for (const job of [big, bigint]) {
          const done = await d.waitFor(job.id, { timeoutMs: 10_000, pollMs: 10 });
          assert.equal(done.state, "dead");
          assert.match(done.lastError ?? "", /return value cannot be stored as its result/);
          assert.equal(done.result, null);
        }
        // The reason names the result, not a payload.
        assert.match((await d.get(bigint.id))!.lastError ?? "", /as its result: result\.n is a bigint/);
      } finally {
        await w.stop();
      }
    },
  },
  {
    name: "results › completions with different results in one settle batch each store their own",
    async run(t) {
      for (let i = 0; i < 3; i++) await insert(t);
      const running = await claim(t, 3);
      const now = t.clock.now();
      const results = [JSON.stringify({ i: 0 }), null, JSON.stringify([1, "two"])];
      const settled = await t.adapter.settle({
        items: running.map((j, i) => ({ kind: "complete" as const, id: j.id, leaseToken: j.leaseToken!, now, concurrencyKey: null, result: results[i] })),
      });
      assert.deepEqual(settled.map((s) => s?.result), results);
      for (const [i, j] of running.entries()) assert.equal((await t.adapter.get({ id: j.id }))?.result, results[i]);
    },
  },
  {
    name: "results › progress is recorded only for the lease holder; ctx.progress shows while the job runs, and rejects with LeaseLostError once the lease is gone",
    slow: true,
    async run(t) {
      await insert(t);
      const [job] = await claim(t, 1);
      const fence = { id: job!.id, leaseToken: job!.leaseToken!, now: t.clock.now() };
      assert.equal((await t.adapter.setProgress({ ...fence, progress: '{"pct":10}' }))?.progress, '{"pct":10}');
      assert.equal(await t.adapter.setProgress({ ...fence, leaseToken: "not-mine", progress: "1" }), null);
      await settleOne(t.adapter, { kind: "complete", ...fence });
      assert.equal(await t.adapter.setProgress({ ...fence, progress: "2" }), null, "a finished job takes no progress");
      assert.equal((await t.adapter.get({ id: job!.id }))?.progress, '{"pct":10}');

      const d = new Docket({ adapter: t.adapter });
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let afterCancel: unknown = null;
      const w = d.worker({
        pollMs: 20,
        logger: null,
        handlers: {
          slow: async (_p, ctx) => {
            await ctx.progress({ pct: 50 });
            await gate;
            await ctx.progress({ pct: 99 }).catch((error) => (afterCancel = error));
          },
        },
      });
      const slow = await d.enqueue("slow", {});
      await w.start();
      try {
        await eventually(async () => JSON.stringify((await d.get(slow.id))?.progress) === '{"pct":50}', 10_000, "progress 50 visible while running");
        await d.cancel(slow.id);
        release();
        await eventually(async () => afterCancel !== null, 10_000, "the progress after cancel settled");
        assert.equal((afterCancel as { code?: string }).code, "LEASE_LOST");
        assert.deepEqual((await d.get(slow.id))?.progress, { pct: 50 });
      } finally {
        await w.stop();
      }
    },
  },
  {
    name: "results › waitFor rejects with WaitTimeoutError, NotFoundError, the signal's reason, and InvalidArgumentError for bad options",
    async run(t) {
      const d = t.docket();
      const job = await d.enqueue("t", {});
      await assert.rejects(d.waitFor(job.id, { timeoutMs: 30, pollMs: 5 }), code("WAIT_TIMEOUT"));
      await assert.rejects(d.waitFor(job.id + 1000, { timeoutMs: 30 }), code("NOT_FOUND"));
      const controller = new AbortController();
      const waiting = d.waitFor(job.id, { signal: controller.signal, pollMs: 5 });
      await sleep(20);
      controller.abort(new Error("caller gave up"));
      await assert.rejects(waiting, /caller gave up/);
      for (const options of [{ timeoutMs: -1 }, { pollMs: 0 }, { signal: {} }, { timeout: 5 }]) {
        await assert.rejects(d.waitFor(job.id, options as never), code("INVALID_ARGUMENT"), JSON.stringify(options));
      }
      assert.equal((await d.get(job.id))?.state, "ready", "waiting changed nothing");
    },
  },
];
