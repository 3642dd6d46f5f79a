import assert from "node:assert/strict";
import type { DocketAdapter, NewJob } from "../../core/adapter.ts";
import { DocketError } from "../../core/errors.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { LEASE_MS, insert, newJob, token } from "./helpers.ts";
import { settleOne } from "../lease-writes.ts";

/** Claims up to `limit` of `queues` at the clock's now; returns the jobs and when a rate limit said it has room again. */
async function claimAt(t: CaseContext, limit: number, queues = ["q"], adapter: DocketAdapter = t.adapter, extra: { constrainedLimit?: number } = {}) {
  const now = t.clock.now();
  let roomAt: number | null = null;
  const jobs = await adapter.claim({ queues, limit, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS, onRateLimited: (at) => (roomAt = at), ...extra });
  return { jobs, roomAt: roomAt as number | null };
}

const keyed = (key: string, limit: number, periodMs = 1000, more: Partial<NewJob> = {}): Partial<NewJob> => ({ queue: "q", rateLimit: { key, limit, periodMs }, ...more });
const isInvalid = (e: unknown) => e instanceof DocketError && e.code === "INVALID_ARGUMENT";

export const rateLimitCases: ConformanceCase[] = [
  {
    name: "rate limits › a queue limit of 3 per second starts 3, then none until the window slides past them (R20)",
    async run(t) {
      for (let i = 0; i < 8; i++) await insert(t, { queue: "q" });
      await t.adapter.setQueueControl({ queue: "q", rateLimit: { limit: 3, periodMs: 1000 } });
      const start = t.clock.now();
      const first = await claimAt(t, 10);
      assert.equal(first.jobs.length, 3);
      assert.equal(first.roomAt, start + 1000, "the claim says when the window has room again");
      t.clock.advance(999);
      assert.deepEqual((await claimAt(t, 10)).jobs, [], "999 ms later the three starts are still in the window");
      t.clock.advance(1);
      assert.equal((await claimAt(t, 10)).jobs.length, 3);
    },
  },
  {
    name: "rate limits › a changed limit counts the starts of its log: a lowered limit and a lengthened period count those of the last two old periods",
    async run(t) {
      for (let i = 0; i < 20; i++) await insert(t, { queue: "q" });
      await t.adapter.setQueueControl({ queue: "q", rateLimit: { limit: 3, periodMs: 1000 } });
      assert.equal((await claimAt(t, 10)).jobs.length, 3);
      t.clock.advance(1_500);
      assert.equal((await claimAt(t, 1)).jobs.length, 1, "t=1500: the three starts of t=0 left the window");
      // Lowered to 1: the start of t=1500 fills it.
      await t.adapter.setQueueControl({ queue: "q", rateLimit: { limit: 1, periodMs: 1000 } });
      assert.deepEqual((await claimAt(t, 10)).jobs, []);
      // Lengthened to 4 per 10 s at t=1900: the four starts of t=0 and t=1500 are within 2 × the old period and all count.
      t.clock.advance(400);
      await t.adapter.setQueueControl({ queue: "q", rateLimit: { limit: 4, periodMs: 10_000 } });
      assert.deepEqual((await claimAt(t, 10)).jobs, [], "four starts in the new window: no room");
      t.clock.advance(8_099);
      assert.deepEqual((await claimAt(t, 10)).jobs, [], "t=9999: all four still in the new window");
      t.clock.advance(1);
      assert.equal((await claimAt(t, 10)).jobs.length, 3, "t=10000: the three of t=0 left; the one of t=1500 still counts");
    },
  },
  {
    name: "rate limits › a sliding window: starts leave it one by one, not all at a boundary",
    async run(t) {
      for (let i = 0; i < 10; i++) await insert(t, { queue: "q" });
      await t.adapter.setQueueControl({ queue: "q", rateLimit: { limit: 3, periodMs: 1000 } });
      assert.equal((await claimAt(t, 2)).jobs.length, 2);
      t.clock.advance(500);
      assert.equal((await claimAt(t, 10)).jobs.length, 1);
      t.clock.advance(500);
      assert.equal((await claimAt(t, 10)).jobs.length, 2, "the two starts of t=0 left; the one of t=500 still counts");
      t.clock.advance(499);
      assert.equal((await claimAt(t, 10)).jobs.length, 0);
      t.clock.advance(1);
      assert.equal((await claimAt(t, 10)).jobs.length, 1);
    },
  },
  {
    name: "rate limits › a claim inside a limit's slack logs the starts it took, not the ones it asked for; the window then holds the limit exactly",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "q", rateLimit: { limit: 10, periodMs: 1000 } });
      for (let i = 0; i < 2; i++) await insert(t, { queue: "q" });
      assert.equal((await claimAt(t, 4)).jobs.length, 2, "asked for 4 of a window's 5 starts of slack; 2 were ready");
      for (let i = 0; i < 12; i++) await insert(t, { queue: "q" });
      assert.equal((await claimAt(t, 3)).jobs.length, 3, "3 more, inside the slack left");
      const last = await claimAt(t, 20);
      assert.equal(last.jobs.length, 5, "the window's 10 less the 2 and the 3 started");
      assert.equal(last.roomAt, t.clock.now() + 1000);
      assert.deepEqual((await claimAt(t, 20)).jobs, []);
      t.clock.advance(1000);
      assert.equal((await claimAt(t, 20)).jobs.length, 4, "a window later, the rest");
    },
  },
  {
    name: "rate limits › a claimed job names the limit that held it back after it fell due (delayedBy); one never held back names none",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "q", rateLimit: { limit: 1, periodMs: 1000 } });
      for (let i = 0; i < 2; i++) await insert(t, { queue: "q" });
      const [first] = (await claimAt(t, 5)).jobs;
      assert.equal(first!.delayedBy, undefined, "the first start waited for nothing");
      t.clock.advance(1000);
      const [second] = (await claimAt(t, 5)).jobs;
      assert.deepEqual(second!.delayedBy, { scope: "queue", name: "q" }, "the second waited for the queue's limit");
      t.clock.advance(5000);
      await insert(t, { queue: "q" });
      const [third] = (await claimAt(t, 5)).jobs;
      assert.equal(third!.delayedBy, undefined, "due after the limit had room again: not held back");
      // A rate key, beside a queue limit that never ran out: the key is named.
      await t.adapter.setQueueControl({ queue: "q", rateLimit: { limit: 100, periodMs: 1000 } });
      for (let i = 0; i < 2; i++) await insert(t, keyed("api", 1, 60_000));
      assert.equal((await claimAt(t, 5)).jobs.length, 1);
      t.clock.advance(60_000);
      const [keyedJob] = (await claimAt(t, 5)).jobs;
      assert.deepEqual(keyedJob!.delayedBy, { scope: "key", name: "api" });
    },
  },
  {
    name: "rate limits › a job held back stays ready with its attempt unspent",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "q", rateLimit: { limit: 1, periodMs: 60_000 } });
      await insert(t, { queue: "q" });
      const second = await insert(t, { queue: "q" });
      assert.equal((await claimAt(t, 5)).jobs.length, 1);
      assert.deepEqual(await t.adapter.get({ id: second.id }), second);
    },
  },
  {
    name: "rate limits › a task limit holds across queues; other tasks still run",
    async run(t) {
      await t.adapter.setTaskControl({ task: "api", rateLimit: { limit: 2, periodMs: 1000 } });
      for (const queue of ["q1", "q2"]) for (let i = 0; i < 3; i++) await insert(t, { queue, task: "api" });
      await insert(t, { queue: "q2", task: "local" });
      const got = (await claimAt(t, 10, ["q1", "q2"])).jobs;
      assert.equal(got.filter((j) => j.task === "api").length, 2);
      assert.equal(got.filter((j) => j.task === "local").length, 1);
    },
  },
  {
    name: "rate limits › a rate key limits its jobs only; a spent key does not hide the jobs behind it",
    async run(t) {
      for (let i = 0; i < 4; i++) await insert(t, keyed("tenant:1", 1));
      const other = await insert(t, keyed("tenant:2", 1));
      const plain = await insert(t, { queue: "q" });
      const first = await claimAt(t, 1);
      assert.equal(first.jobs[0]?.rateKey, "tenant:1");
      const next = await claimAt(t, 5);
      assert.deepEqual(next.jobs.map((j) => j.id).sort((a, b) => a - b), [other.id, plain.id]);
      assert.ok(next.roomAt !== null && next.roomAt > t.clock.now());
    },
  },
  {
    name: "rate limits › a rate key's stored limit is the last enqueue's",
    async run(t) {
      for (let i = 0; i < 3; i++) await insert(t, keyed("k", 1));
      await insert(t, keyed("k", 3));
      assert.equal((await claimAt(t, 10)).jobs.length, 3);
    },
  },
  {
    name: "rate limits › a job must satisfy all its controls: queue cap, queue limit, task limit, key limit, concurrency key",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 2, rateLimit: { limit: 5, periodMs: 1000 } });
      for (let i = 0; i < 6; i++) await insert(t, { queue: "q" });
      assert.equal((await claimAt(t, 10)).jobs.length, 2, "the cap is the tighter control");
      await t.adapter.setQueueControl({ queue: "q", maxRunning: null });
      assert.equal((await claimAt(t, 10)).jobs.length, 3, "then the limit: 5 starts in the window");
      t.clock.advance(1000);
      await t.adapter.setTaskControl({ task: "t", rateLimit: { limit: 1, periodMs: 1000 } });
      assert.equal((await claimAt(t, 10)).jobs.length, 1, "the task's limit is tighter still");
      t.clock.advance(1000);
      await t.adapter.setTaskControl({ task: "t", rateLimit: null });
      await t.adapter.setQueueControl({ queue: "q", rateLimit: null });
      await insert(t, keyed("k", 5, 1000, { concurrency: { key: "c", limit: 1, onConflict: "block" } }));
      await insert(t, keyed("k", 5, 1000, { concurrency: { key: "c", limit: 1, onConflict: "block" } }));
      const got = (await claimAt(t, 10)).jobs;
      assert.equal(got.filter((j) => j.rateKey === "k").length, 1, "the concurrency key admits one of the two");
    },
  },
  {
    name: "rate limits › a rate key's jobs, and a limit more than half used, are constrained: a claim with no room for constrained jobs leaves them ready",
    async run(t) {
      await t.adapter.setTaskControl({ task: "api", rateLimit: { limit: 2, periodMs: 1000 } });
      const api = [await insert(t, { queue: "q", task: "api" }), await insert(t, { queue: "q", task: "api" })];
      await insert(t, keyed("k", 10));
      const plain = await insert(t, { queue: "q" });
      const got = (await claimAt(t, 10, ["q"], t.adapter, { constrainedLimit: 0 })).jobs;
      assert.deepEqual(got.map((j) => j.id).sort((a, b) => a - b), [api[0]!.id, plain.id], "one start of the task's 2 is slack; the rate key's job waits");
      assert.deepEqual((await claimAt(t, 10, ["q"], t.adapter, { constrainedLimit: 0 })).jobs, [], "the task's limit is half used: no slack left");
      assert.deepEqual((await claimAt(t, 10, ["q"], t.adapter, { constrainedLimit: 1 })).jobs.map((j) => j.id).sort((a, b) => a - b), [api[1]!.id], "the rate key's job and the task's last start compete for one constrained place, in claim order");
    },
  },
  {
    name: "rate limits › a claim whose time is earlier than a start its limit logged stamps its jobs' start at that logged time, where the window counts them",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "q", rateLimit: { limit: 3, periodMs: 1000 } });
      for (let i = 0; i < 3; i++) await insert(t, { queue: "q" });
      const late = t.clock.now();
      const first = await t.adapter.claim({ queues: ["q"], limit: 1, now: late, leaseToken: token(), leaseExpiresAt: late + LEASE_MS });
      assert.equal(first[0]!.startedAt, late);
      // A claim that took its time 10 ms earlier (before waiting for the limit's lock) and ran after the first.
      const early = await t.adapter.claim({ queues: ["q"], limit: 1, now: late - 10, leaseToken: token(), leaseExpiresAt: late + LEASE_MS });
      assert.equal(early.length, 1);
      assert.equal(early[0]!.startedAt, late, "stamped at the logged start, not 10 ms before it");
      assert.equal((await t.adapter.get({ id: early[0]!.id }))!.startedAt, late, "as stored");
      const unlimited = await insert(t, { queue: "free" });
      const plain = await t.adapter.claim({ queues: ["free"], limit: 1, now: late - 10, leaseToken: token(), leaseExpiresAt: late + LEASE_MS });
      assert.deepEqual([plain[0]!.id, plain[0]!.startedAt], [unlimited.id, late - 10], "a claim that takes no limited start keeps its own time");
    },
  },
  ...(["queue", "task"] as const).map(
    (scope): ConformanceCase => ({
      name: `rate limits › a ${scope} limit's slack (up to half the window, while the last two windows hold at most one) is taken without room for constrained jobs, returned after the constrained jobs; the rest only with room; the limit holds either way`,
      async run(t) {
        const limit = { limit: 4, periodMs: 60_000 };
        if (scope === "queue") await t.adapter.setQueueControl({ queue: "q", rateLimit: limit });
        else await t.adapter.setTaskControl({ task: "api", rateLimit: limit });
        for (let i = 0; i < 6; i++) await insert(t, { queue: "q", task: "api" });
        // In another queue and task: it takes no start of the limit.
        const keyedJob = await insert(t, { queue: "o", task: "other", priority: -1, concurrency: { key: "c", limit: 1, onConflict: "block" } });
        const ids = async (constrainedLimit: number) => (await claimAt(t, 10, ["o", "q"], t.adapter, { constrainedLimit })).jobs.map((j) => j.id);
        const first = await ids(1);
        assert.equal(first.length, 3, "the keyed job (first in claim order, the one constrained place) and the limit's 2 starts of slack");
        assert.equal(first[0], keyedJob.id, "the constrained job first");
        assert.deepEqual(await ids(0), [], "half the limit used: its jobs are constrained");
        assert.equal((await ids(1)).length, 1);
        assert.equal((await ids(5)).length, 1, "the limit's last start");
        assert.deepEqual(await ids(5), [], "4 starts in the window");
        t.clock.advance(60_000);
        assert.deepEqual(await ids(0), [], "a window later, the last two windows hold a full window: the limit binds, no slack");
        t.clock.advance(60_000);
        assert.equal((await ids(0)).length, 2, "two windows later, slack again: the 2 jobs left");
      },
    }),
  ),
  {
    name: "rate limits › a limit is stored: listControls reads it back from any connection; null removes it",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "q", rateLimit: { limit: 100, periodMs: 60_000 } });
      const task = await t.adapter.setTaskControl({ task: "x", rateLimit: { limit: 5, periodMs: 1000 } });
      assert.deepEqual(task, { task: "x", maxRunning: null, rateLimit: { limit: 5, periodMs: 1000 } });
      const other = await t.connect();
      assert.deepEqual(await other.listControls(), {
        queues: [{ queue: "q", paused: false, maxRunning: null, rateLimit: { limit: 100, periodMs: 60_000 } }],
        tasks: [{ task: "x", maxRunning: null, rateLimit: { limit: 5, periodMs: 1000 } }],
      });
      await t.adapter.setQueueControl({ queue: "q", rateLimit: null });
      for (let i = 0; i < 3; i++) await insert(t, { queue: "q" });
      assert.equal((await claimAt(t, 10)).jobs.length, 3);
    },
  },
  {
    name: "rate limits › concurrent claimers on separate connections never start more than the limit in a window (R20)",
    slow: true,
    async run(t) {
      const conns = [t.adapter, await t.connect(), await t.connect(), await t.connect()];
      await t.adapter.setQueueControl({ queue: "q", rateLimit: { limit: 3, periodMs: 1000 } });
      const now = t.clock.now();
      await t.adapter.enqueue({ jobs: Array.from({ length: 40 }, () => newJob({ queue: "q", runAt: now })), now });
      await t.adapter.enqueue({ jobs: Array.from({ length: 40 }, () => newJob({ queue: "q", runAt: now, rateLimit: { key: "k", limit: 2, periodMs: 1000 } })), now });
      for (let round = 0; round < 6; round++) {
        const at = t.clock.now();
        const got = (await Promise.all(conns.map((c) => c.claim({ queues: ["q"], limit: 3, now: at, leaseToken: token(), leaseExpiresAt: at + LEASE_MS })))).flat();
        assert.ok(got.length <= 3, `round ${round}: ${got.length} started, queue limit 3 per second`);
        assert.ok(got.filter((j) => j.rateKey === "k").length <= 2, `round ${round}: key limit 2 per second`);
        assert.equal(got.length, 3, `round ${round}: the limit must be used fully while jobs are ready`);
        for (const j of got) await settleOne(conns[0]!, { kind: "complete", id: j.id, leaseToken: j.leaseToken!, now: at });
        t.clock.advance(1000);
      }
    },
  },
  {
    name: "rate limits › stats() shows each limit, the starts in its window, the jobs waiting on it and when it next has room",
    async run(t) {
      const d = t.docket();
      await d.setQueueRateLimit("q", { limit: 2, periodMs: 1000 });
      await d.setTaskRateLimit("api", { limit: 5, periodMs: 60_000 });
      for (let i = 0; i < 4; i++) await insert(t, { queue: "q" });
      await insert(t, keyed("tenant:1", 1, 1000, { queue: "other" }));
      await insert(t, keyed("tenant:1", 1, 1000, { queue: "other" }));
      const start = t.clock.now();
      assert.equal((await claimAt(t, 10)).jobs.length, 2);
      assert.equal((await claimAt(t, 10, ["other"])).jobs.length, 1);
      t.clock.advance(100);
      const s = await d.stats();
      assert.deepEqual(s.rateLimits, [
        { scope: "queue", name: "q", limit: 2, periodMs: 1000, used: 2, waiting: 2, nextStartAt: start + 1000 },
        { scope: "task", name: "api", limit: 5, periodMs: 60_000, used: 0, waiting: 0, nextStartAt: null },
        { scope: "key", name: "tenant:1", limit: 1, periodMs: 1000, used: 1, waiting: 1, nextStartAt: start + 1000 },
      ]);
      assert.deepEqual(s.queues.find((q) => q.queue === "q")?.rateLimit, { limit: 2, periodMs: 1000 });
    },
  },
  ...(
    [
      ["a limit of 0", { limit: 0, periodMs: 1000 }],
      ["a negative limit", { limit: -1, periodMs: 1000 }],
      ["a fractional limit", { limit: 1.5, periodMs: 1000 }],
      ["a period of 0", { limit: 1, periodMs: 0 }],
      ["a NaN period", { limit: 1, periodMs: NaN }],
      ["no period", { limit: 1 }],
      ["an unknown field", { limit: 1, periodMs: 1000, burst: 2 }],
      ["a number", 5],
    ] as [string, unknown][]
  ).map(([what, limit]) => ({
    name: `rate limits › ${what} is InvalidArgumentError and writes nothing`,
    async run(t: CaseContext) {
      const d = t.docket();
      await assert.rejects(() => d.setQueueRateLimit("q", limit as never), isInvalid);
      await assert.rejects(() => d.setTaskRateLimit("x", limit as never), isInvalid);
      const rateLimit = typeof limit === "object" ? { key: "k", ...(limit as object) } : limit;
      await assert.rejects(() => d.enqueue("t", {}, { rateLimit } as never), isInvalid);
      assert.deepEqual(await t.adapter.listControls(), { queues: [], tasks: [] });
      assert.deepEqual(await t.adapter.list({ limit: 10 }), []);
    },
  })),
  {
    name: "rate limits › an empty or missing rate key is InvalidArgumentError and writes nothing",
    async run(t) {
      const d = t.docket();
      for (const rateLimit of [{ key: "", limit: 1, periodMs: 1000 }, { limit: 1, periodMs: 1000 }, null]) {
        await assert.rejects(() => d.enqueue("t", {}, { rateLimit } as never), isInvalid);
      }
      assert.deepEqual(await t.adapter.list({ limit: 10 }), []);
    },
  },
];
