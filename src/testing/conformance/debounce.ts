import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import type { DocketAdapter, EnqueueParams } from "../../core/adapter.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { claim, claimOne, LEASE_MS, token } from "./helpers.ts";
import { settleOne } from "../lease-writes.ts";

const isInvalid = (e: { code?: string }) => e.code === "INVALID_ARGUMENT";

async function count(t: CaseContext): Promise<number> {
  return (await t.adapter.list({ limit: 100_000 })).length;
}

/** Stages due scheduled jobs (the first step of every claim) without claiming: a claim of a queue nobody uses. */
async function stage(t: CaseContext): Promise<void> {
  const now = t.clock.now();
  await t.adapter.claim({ queues: ["__no_such_queue__"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
}

const D = { key: "user:7", delayMs: 1_000 };

/** `adapter` with its `enqueue` calls counted in `calls` and, while `failing` is set, refused with it. */
function countingEnqueues(adapter: DocketAdapter, calls: EnqueueParams[], failing: { error: Error | null }): DocketAdapter {
  const enqueue = async (params: EnqueueParams) => {
    calls.push(params);
    if (failing.error) throw failing.error;
    return adapter.enqueue(params);
  };
  return new Proxy(adapter, { get: (target, property) => (property === "enqueue" ? enqueue : Reflect.get(target, property, target)) });
}

/** Debounce keys: one pending job per (queue, task, key), later enqueues merge into it (I14, R22). */
export const debounceCases: ConformanceCase[] = [
  {
    name: "debounce › a burst merges into one pending job: the last payload wins, its run time moves, every merge gets it with created: false",
    async run(t) {
      const d = t.docket();
      const t0 = t.clock.now();
      const first = await d.enqueue("t", { n: 1 }, { debounce: D });
      assert.equal(first.created, true);
      assert.equal(first.state, "scheduled");
      assert.equal(first.runAt, t0 + 1_000);
      assert.equal(first.debounceKey, "user:7");
      t.clock.advance(300);
      const second = await d.enqueue("t", { n: 2 }, { debounce: D, priority: 5 });
      t.clock.advance(300);
      const third = await d.enqueue("t", { n: 3 }, { debounce: D, priority: 7 });
      for (const merged of [second, third]) {
        assert.equal(merged.created, false);
        assert.equal(merged.id, first.id);
      }
      assert.deepEqual(third.payload, { n: 3 });
      assert.equal(third.runAt, t0 + 600 + 1_000, "delayMs after the burst's last enqueue");
      assert.equal(third.priority, 7, "the last enqueue's options win");
      assert.equal(third.createdAt, t0, "createdAt stays the burst's first enqueue");
      assert.equal(await count(t), 1);
      t.clock.advance(999);
      assert.deepEqual(await claim(t), [], "not due until delayMs after the last enqueue");
      t.clock.advance(1);
      const run = await claimOne(t);
      assert.equal(run.id, first.id);
      assert.equal(run.payload, JSON.stringify({ n: 3 }));
    },
  },
  {
    name: "debounce › maxWaitMs caps the run time at the burst's first enqueue + maxWaitMs",
    async run(t) {
      const d = t.docket();
      const t0 = t.clock.now();
      const debounce = { key: "k", delayMs: 1_000, maxWaitMs: 1_500 };
      await d.enqueue("t", { n: 1 }, { debounce });
      t.clock.advance(400);
      assert.equal((await d.enqueue("t", { n: 2 }, { debounce })).runAt, t0 + 1_400);
      t.clock.advance(400);
      const capped = await d.enqueue("t", { n: 3 }, { debounce });
      assert.equal(capped.runAt, t0 + 1_500, "capped, not t0 + 1800");
      t.clock.advance(1_000);
      // Past the cap: the merge leaves the job due (at the cap), and the next claim runs it.
      const late = await d.enqueue("t", { n: 4 }, { debounce });
      assert.equal(late.created, false);
      assert.equal(late.runAt, t0 + 1_500);
      const run = await claimOne(t);
      assert.equal(run.payload, JSON.stringify({ n: 4 }));
    },
  },
  {
    name: "debounce › a merge into a job already staged ready moves it back to scheduled at the new run time",
    async run(t) {
      const d = t.docket();
      const first = await d.enqueue("t", { n: 1 }, { debounce: D });
      t.clock.advance(1_000);
      await stage(t);
      assert.equal((await d.get(first.id))?.state, "ready");
      const merged = await d.enqueue("t", { n: 2 }, { debounce: D });
      assert.equal(merged.id, first.id);
      assert.equal(merged.state, "scheduled");
      assert.equal(merged.runAt, t.clock.now() + 1_000);
      assert.deepEqual(await claim(t), [], "waiting again");
      t.clock.advance(1_000);
      assert.equal((await claimOne(t)).payload, JSON.stringify({ n: 2 }));
    },
  },
  {
    name: "debounce › once the pending job is claimed, the next enqueue with the key creates the next pending job; the running one keeps its payload",
    async run(t) {
      const d = t.docket();
      const first = await d.enqueue("t", { n: 1 }, { debounce: D });
      t.clock.advance(1_000);
      const running = await claimOne(t);
      assert.equal(running.id, first.id);
      const next = await d.enqueue("t", { n: 2 }, { debounce: D });
      assert.equal(next.created, true);
      assert.notEqual(next.id, first.id);
      assert.equal(next.state, "scheduled");
      const again = await d.enqueue("t", { n: 3 }, { debounce: D });
      assert.equal(again.id, next.id);
      const stored = await d.get(first.id);
      assert.equal(stored?.state, "running");
      assert.deepEqual(stored?.payload, { n: 1 });
      assert.equal(await count(t), 2);
    },
  },
  {
    name: "debounce › a claim clears the job's key: when it is retried (or released) while the next burst is pending, neither merges into the other",
    async run(t) {
      const d = t.docket();
      const first = await d.enqueue("t", { n: 1 }, { debounce: D });
      t.clock.advance(1_000);
      const running = await claimOne(t);
      assert.equal(running.debounceKey, null, "a claimed job holds no debounce key");
      const next = await d.enqueue("t", { n: 2 }, { debounce: D });
      assert.equal(next.created, true);
      const now = t.clock.now();
      await settleOne(t.adapter, { kind: "fail", id: first.id, leaseToken: running.leaseToken!, now, error: "boom", retryAt: now });
      assert.equal((await d.get(first.id))?.state, "scheduled", "the retry is pending again, without the key");
      const again = await d.enqueue("t", { n: 3 }, { debounce: D });
      assert.equal(again.id, next.id, "merges into the next burst's job, not the retry");
      assert.deepEqual((await d.get(first.id))?.payload, { n: 1 });
      assert.equal(await count(t), 2);
    },
  },
  {
    name: "debounce › in one enqueueMany a repeated key merges into the earlier item's job; keys are scoped to queue and task",
    async run(t) {
      const d = t.docket();
      const jobs = await d.enqueueMany([
        { task: "t", payload: { i: 0 }, options: { debounce: D } },
        { task: "t", payload: { i: 1 }, options: { debounce: { key: "other", delayMs: 500 } } },
        { task: "t", payload: { i: 2 }, options: { debounce: D } },
        { task: "u", payload: { i: 3 }, options: { debounce: D } },
        { task: "t", payload: { i: 4 }, options: { debounce: D, queue: "q2" } },
        { task: "t", payload: { i: 5 } },
      ]);
      assert.deepEqual(jobs.map((j) => j.created), [true, true, false, true, true, true]);
      assert.equal(jobs[2]!.id, jobs[0]!.id);
      assert.deepEqual((await d.get(jobs[0]!.id))?.payload, { i: 2 });
      assert.equal(await count(t), 5);
    },
  },
  {
    name: "debounce › bad options are InvalidArgumentError and write nothing, also from a later item of enqueueMany",
    async run(t) {
      const d = t.docket();
      const bad: [unknown, RegExp][] = [
        [{ key: "k", delayMs: 0 }, /debounce\.delayMs must be an integer in \[1, /],
        [{ key: "k", delayMs: -5 }, /debounce\.delayMs must be an integer/],
        [{ key: "k", delayMs: 1.5 }, /debounce\.delayMs must be an integer/],
        [{ key: "k", delayMs: 1_000, maxWaitMs: 999 }, /debounce\.maxWaitMs \(at least delayMs, 1000\) must be an integer in \[1000, /],
        [{ key: "", delayMs: 1_000 }, /debounce\.key must be a non-empty string/],
        [{ key: "k", delayMs: 1_000, maxWait: 5 }, /unknown option "maxWait" in options\.debounce \(did you mean "maxWaitMs"\?\)/],
        [{ delayMs: 1_000 }, /debounce\.key must be a non-empty string/],
        ["k", /options\.debounce must be an object/],
      ];
      for (const [debounce, message] of bad) {
        await assert.rejects(d.enqueue("t", {}, { debounce } as never), (e: { code?: string; message?: string }) => isInvalid(e) && message.test(e.message ?? ""), JSON.stringify(debounce));
      }
      const refused: [object, RegExp][] = [
        [{ idempotencyKey: "i" }, /cannot be combined with idempotencyKey/],
        [{ concurrency: { key: "c", limit: 1 } }, /cannot be combined with a concurrency key/],
        [{ runAt: 0 }, /cannot be combined with runAt/],
        [{ delay: 10 }, /cannot be combined with delay/],
      ];
      for (const [options, message] of refused) {
        await assert.rejects(d.enqueue("t", {}, { debounce: D, ...options }), (e: { code?: string; message?: string }) => isInvalid(e) && message.test(e.message ?? ""));
      }
      const keyed = t.docket({ tasks: { k: { concurrency: { key: "c", limit: 1 } } } });
      await assert.rejects(keyed.enqueue("k", {}, { debounce: D }), (e: { code?: string; message?: string }) => isInvalid(e) && /a concurrency key/.test(e.message ?? ""));
      await assert.rejects(
        d.enqueueMany([
          { task: "t", payload: {}, options: { debounce: D } },
          { task: "t", payload: {}, options: { debounce: { key: "k", delayMs: 0 } } },
        ]),
        isInvalid,
      );
      assert.equal(await count(t), 0);
    },
  },
  {
    name: "debounce › one process's concurrent enqueues of a key coalesce: each caller gets the job, one created, the last payload stored, fewer writes than calls",
    async run(t) {
      const calls: EnqueueParams[] = [];
      const failing = { error: null as Error | null };
      const d = new Docket({ adapter: countingEnqueues(t.adapter, calls, failing), clock: t.clock });
      const results = await Promise.all(Array.from({ length: 20 }, (_, n) => d.enqueue("t", { n }, { debounce: D, priority: n })));
      assert.deepEqual(results.map((r) => r.created), [true, ...Array(19).fill(false)], "only the first caller created the job");
      assert.equal(new Set(results.map((r) => r.id)).size, 1, "every caller got the one pending job");
      const stored = await t.adapter.list({ limit: 100 });
      assert.equal(stored.length, 1);
      assert.equal(stored[0]!.payload, JSON.stringify({ n: 19 }), "the last call's payload wins");
      assert.equal(stored[0]!.priority, 19, "and its options");
      assert.deepEqual(results[19]!.payload, { n: 19 });
      assert.ok(calls.length < 20, `${calls.length} writes for 20 calls`);
      // Another option that a merge does not overwrite (here the queue) is another lane, and so another job.
      const [a, b] = await Promise.all([d.enqueue("t", { n: 0 }, { debounce: D, queue: "q1" }), d.enqueue("t", { n: 0 }, { debounce: D, queue: "q2" })]);
      assert.equal(a!.created && b!.created, true);
      // A write that fails fails every caller it was written for, and stores nothing.
      const before = calls.length;
      const pending = d.enqueue("t", { n: 100 }, { debounce: { key: "other", delayMs: 1_000 } });
      failing.error = new Error("refused by the test");
      const refused = await Promise.allSettled(Array.from({ length: 5 }, (_, n) => d.enqueue("t", { n }, { debounce: { key: "other", delayMs: 1_000 } })));
      failing.error = null;
      assert.equal((await pending).created, true);
      for (const r of refused) assert.equal(r.status === "rejected" && (r.reason as Error).message, "refused by the test");
      assert.equal(calls.length - before, 2, "the first write, then one for the five that waited");
      const other = (await t.adapter.list({ limit: 100 })).filter((j) => j.debounceKey === "other");
      assert.deepEqual(other.map((j) => j.payload), [JSON.stringify({ n: 100 })]);
    },
  },
  {
    name: "debounce › a merge racing nothing but staging and claims: one pending job per key at every step, and every burst runs once with its last payload",
    async run(t) {
      const d = t.docket();
      const keys = ["a", "b", "c"];
      const last = new Map<string, number>();
      const runs: { key: string; n: number }[] = [];
      for (let step = 0; step < 30; step++) {
        const key = keys[step % 3]!;
        await d.enqueue("t", { key, n: step }, { debounce: { key, delayMs: 250 } });
        last.set(key, step);
        const pending = (await t.adapter.list({ limit: 1000 })).filter((j) => ["scheduled", "ready", "blocked"].includes(j.state));
        for (const k of keys) assert.ok(pending.filter((j) => j.debounceKey === k).length <= 1, `two pending jobs for ${k} at step ${step}`);
        t.clock.advance(step % 4 === 0 ? 300 : 100);
        for (const job of await claim(t, 10)) runs.push(JSON.parse(job.payload) as { key: string; n: number });
      }
      t.clock.advance(1_000);
      for (const job of await claim(t, 10)) runs.push(JSON.parse(job.payload) as { key: string; n: number });
      for (const k of keys) assert.equal(Math.max(...runs.filter((r) => r.key === k).map((r) => r.n)), last.get(k), `key ${k}'s last enqueue ran`);
      assert.equal(runs.length, new Set(runs.map((r) => `${r.key}:${r.n}`)).size, "no payload ran twice");
      assert.equal(runs.length, await count(t), "every stored job ran once");
    },
  },
  {
    name: "debounce › a merge takes the last enqueue's rate key and fairness key (a merge without them clears them), and the claim obeys the merged rate key",
    async run(t) {
      const d = t.docket();
      const first = await d.enqueue("t", { n: 1 }, { debounce: D, rateLimit: { key: "R1", limit: 5, periodMs: 10_000 }, fairness: { key: "F1" } });
      const second = await d.enqueue("t", { n: 2 }, { debounce: D, rateLimit: { key: "R2", limit: 1, periodMs: 10_000 }, fairness: { key: "F2", weight: 3 } });
      assert.equal(second.id, first.id);
      assert.equal(second.created, false);
      assert.equal(second.rateKey, "R2");
      assert.equal(second.fairKey, "F2");
      assert.equal((await d.get(first.id))?.rateKey, "R2", "as stored");
      const cleared = await d.enqueue("t", { n: 3 }, { debounce: D });
      assert.equal(cleared.id, first.id);
      assert.equal(cleared.rateKey, null);
      assert.equal(cleared.fairKey, null);
      // A merge that adds a spent rate key: the job waits for it once due.
      const spender = await d.enqueue("other", {}, { rateLimit: { key: "R3", limit: 1, periodMs: 10_000 } });
      assert.equal((await claimOne(t)).id, spender.id);
      const merged = await d.enqueue("t", { n: 4 }, { debounce: D, rateLimit: { key: "R3", limit: 1, periodMs: 10_000 } });
      assert.equal(merged.rateKey, "R3");
      t.clock.advance(1_000);
      assert.deepEqual(await claim(t), [], "held by R3, whose one start in 10 s is spent");
      t.clock.advance(9_000);
      const run = await claimOne(t);
      assert.equal(run.id, first.id);
      assert.equal(run.payload, JSON.stringify({ n: 4 }));
      assert.equal(await count(t), 2);
    },
  },
];
