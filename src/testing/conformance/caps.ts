import assert from "node:assert/strict";
import { DocketError } from "../../core/errors.ts";
import type { ConformanceCase } from "../harness.ts";
import { LEASE_MS, claim, insert, newJob, token } from "./helpers.ts";
import { settleOne } from "../lease-writes.ts";

export const capCases: ConformanceCase[] = [
  {
    name: "caps › a queue cap of 3 runs exactly 3 while more are ready; a freed slot admits one more (R8)",
    async run(t) {
      for (let i = 0; i < 6; i++) await insert(t, { queue: "q" });
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 3 });
      const first = await claim(t, 10, t.adapter, ["q"]);
      assert.equal(first.length, 3);
      assert.deepEqual(await claim(t, 10, t.adapter, ["q"]), []);
      await settleOne(t.adapter, { kind: "complete", id: first[0]!.id, leaseToken: first[0]!.leaseToken!, now: t.clock.now() });
      assert.equal((await claim(t, 10, t.adapter, ["q"])).length, 1);
    },
  },
  {
    name: "caps › a cap of 1 runs one, not zero (R8)",
    async run(t) {
      await insert(t, { queue: "q" });
      await insert(t, { queue: "q" });
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 1 });
      assert.equal((await claim(t, 5, t.adapter, ["q"])).length, 1);
      assert.equal((await claim(t, 5, t.adapter, ["q"])).length, 0);
    },
  },
  {
    name: "caps › a task cap holds across queues; other tasks still run",
    async run(t) {
      for (const queue of ["q1", "q2"]) for (let i = 0; i < 3; i++) await insert(t, { queue, task: "heavy" });
      await insert(t, { queue: "q1", task: "light" });
      await t.adapter.setTaskControl({ task: "heavy", maxRunning: 2 });
      const got = await claim(t, 10, t.adapter, ["q1", "q2"]);
      assert.equal(got.filter((j) => j.task === "heavy").length, 2);
      assert.equal(got.filter((j) => j.task === "light").length, 1);
    },
  },
  {
    name: "caps › a job whose task cap is full does not hide the jobs behind it",
    async run(t) {
      await t.adapter.setTaskControl({ task: "u", maxRunning: 1 });
      await insert(t, { task: "u" });
      assert.equal((await claim(t, 1))[0]?.task, "u");
      await insert(t, { task: "u" });
      await insert(t, { task: "u" });
      const other = await insert(t, { task: "t" });
      assert.deepEqual((await claim(t, 1)).map((j) => j.id), [other.id]);
    },
  },
  {
    name: "caps › a claim takes jobs greedily in claim order across capped queues and tasks",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "a", maxRunning: 1 });
      await t.adapter.setTaskControl({ task: "u", maxRunning: 1 });
      const now = t.clock.now();
      const bu = await insert(t, { queue: "b", task: "u" });
      const at = await insert(t, { queue: "a", task: "t", state: "scheduled", runAt: now + 500 });
      await insert(t, { queue: "a", task: "u" });
      t.clock.advance(1001);
      await insert(t, { queue: "b", task: "t" });
      assert.deepEqual((await claim(t, 2, t.adapter, ["a", "b"])).map((j) => j.id), [bu.id, at.id]);
    },
  },
  {
    name: "caps › a job passed over by a full cap keeps no trace of the attempt (R9)",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 1 });
      await insert(t, { queue: "q" });
      const second = await insert(t, { queue: "q" });
      await claim(t, 5, t.adapter, ["q"]);
      assert.deepEqual(await t.adapter.get({ id: second.id }), second);
    },
  },
  {
    name: "caps › concurrent claimers on separate connections never exceed the queue cap (R7)",
    slow: true,
    async run(t) {
      const conns = [t.adapter, await t.connect(), await t.connect(), await t.connect()];
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 2 });
      for (let round = 0; round < 20; round++) {
        const now = t.clock.advance(1);
        await t.adapter.enqueue({ jobs: Array.from({ length: 4 }, () => newJob({ queue: "q", runAt: now })), now });
        const got = (
          await Promise.all(conns.map((c) => c.claim({ queues: ["q"], limit: 2, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS })))
        ).flat();
        const runningNow = await t.adapter.list({ queue: "q", state: "running", limit: 100 });
        assert.ok(runningNow.length <= 2, `round ${round}: ${runningNow.length} running, cap 2`);
        assert.equal(runningNow.length, 2, `round ${round}: the cap must be used fully while jobs are ready`);
        for (const j of got) await settleOne(conns[0]!, { kind: "complete", id: j.id, leaseToken: j.leaseToken!, now });
      }
    },
  },
  {
    name: "pause › a paused queue's jobs are not claimed by anyone; resume makes them claimable; other queues run",
    async run(t) {
      const paused = await insert(t, { queue: "p" });
      const other = await insert(t, { queue: "o" });
      const control = await t.adapter.setQueueControl({ queue: "p", paused: true });
      assert.deepEqual(control, { queue: "p", paused: true, maxRunning: null, rateLimit: null });
      const second = await t.connect();
      assert.deepEqual((await claim(t, 10, second, ["p", "o"])).map((j) => j.id), [other.id]);
      await t.adapter.setQueueControl({ queue: "p", paused: false });
      assert.deepEqual((await claim(t, 10, second, ["p"])).map((j) => j.id), [paused.id]);
    },
  },
  {
    name: "controls › caps and pause are stored: listControls reads them back from any connection",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 4 });
      await t.adapter.setQueueControl({ queue: "q", paused: true });
      await t.adapter.setTaskControl({ task: "x", maxRunning: 2 });
      const other = await t.connect();
      assert.deepEqual(await other.listControls(), {
        queues: [{ queue: "q", paused: true, maxRunning: 4, rateLimit: null }],
        tasks: [{ task: "x", maxRunning: 2, rateLimit: null }],
      });
    },
  },
  {
    name: "controls › a control set back to its default leaves no row: resuming a queue never paused (a mistyped name), a cap or a rate limit removed; a queue its rate-keyed jobs marked keeps its row",
    async run(t) {
      const d = t.docket();
      assert.deepEqual(await d.resumeQueue("mial-typo"), { queue: "mial-typo", paused: false, maxRunning: null, rateLimit: null });
      await d.pauseQueue("p");
      await d.resumeQueue("p");
      await d.setQueueCap("c", 3);
      await d.setQueueCap("c", null);
      await d.setQueueRateLimit("l", { limit: 5, periodMs: 1000 });
      await d.setQueueRateLimit("l", null);
      await d.setTaskCap("x", 2);
      await d.setTaskCap("x", null);
      await d.setTaskRateLimit("y", { limit: 5, periodMs: 1000 });
      await d.setTaskRateLimit("y", null);
      assert.deepEqual(await t.adapter.listControls(), { queues: [], tasks: [] });
      // A cap and a pause: removing one keeps the row for the other.
      await d.setQueueCap("both", 2);
      await d.pauseQueue("both");
      await d.setQueueCap("both", null);
      await d.enqueue("t", {}, { queue: "marked", rateLimit: { key: "k", limit: 1, periodMs: 1000 } });
      await d.pauseQueue("marked");
      await d.resumeQueue("marked");
      const other = await t.connect();
      const { queues } = await other.listControls();
      assert.deepEqual(
        queues.map((q) => [q.queue, q.paused]),
        [
          ["both", true],
          ["marked", false],
        ],
      );
      // The marked queue's claims still apply its key's limit.
      await d.enqueue("t", {}, { queue: "marked", rateLimit: { key: "k", limit: 1, periodMs: 1000 } });
      const now = t.clock.now();
      const got = await t.adapter.claim({ queues: ["marked"], limit: 10, now, leaseToken: token(), leaseExpiresAt: now + 60_000 });
      assert.equal(got.length, 1, "one start per second for key k");
    },
  },
  ...([0, -1, 1.5, NaN, Infinity] as number[]).map((cap) => ({
    name: `controls › a cap of ${cap} is InvalidArgumentError and writes nothing`,
    async run(t: import("../harness.ts").CaseContext) {
      const d = t.docket();
      await assert.rejects(() => d.setQueueCap("q", cap), (e: unknown) => e instanceof DocketError && e.code === "INVALID_ARGUMENT");
      await assert.rejects(() => d.setTaskCap("x", cap), (e: unknown) => e instanceof DocketError && e.code === "INVALID_ARGUMENT");
      assert.deepEqual(await t.adapter.listControls(), { queues: [], tasks: [] });
    },
  })),
  ...(
    [
      ["a limit of 0", { key: "k", limit: 0 }],
      ["a NaN limit", { key: "k", limit: NaN }],
      ["an empty key", { key: "", limit: 1 }],
      ["an unknown onConflict", { key: "k", limit: 1, onConflict: "queue" }],
    ] as [string, object][]
  ).map(([what, concurrency]) => ({
    name: `keys › ${what} is InvalidArgumentError and writes nothing`,
    async run(t: import("../harness.ts").CaseContext) {
      const d = t.docket();
      await assert.rejects(() => d.enqueue("t", {}, { concurrency } as never), (e: unknown) => e instanceof DocketError && e.code === "INVALID_ARGUMENT");
      assert.deepEqual(await t.adapter.list({ limit: 10 }), []);
    },
  })),
  {
    name: "keys › a task's concurrency key may be computed from the payload",
    async run(t) {
      const d = t.docket<{ sync: { user: number } }>({ tasks: { sync: { concurrency: { key: (p) => `user:${p.user}`, limit: 1 } } } });
      const a = await d.enqueue("sync", { user: 7 });
      const b = await d.enqueue("sync", { user: 7 });
      const c = await d.enqueue("sync", { user: 8 });
      assert.deepEqual([a.state, b.state, c.state], ["ready", "blocked", "ready"]);
      assert.equal(b.concurrencyKey, "user:7");
    },
  },
];
