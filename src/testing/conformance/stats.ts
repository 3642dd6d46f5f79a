import assert from "node:assert/strict";
import { InvalidArgumentError } from "../../core/errors.ts";
import type { ConformanceCase } from "../harness.ts";
import { LEASE_MS, token } from "./helpers.ts";
import { settleOne } from "../lease-writes.ts";

/** docket.stats(): counts per queue and task by state, ages, pauses and caps, leases and keys. */
export const statsCases: ConformanceCase[] = [
  {
    name: "stats › counts per queue and task by state, oldest ready age, pause and caps, running jobs by lease expiry, keys with slots and blocked jobs",
    async run(t) {
      const d = t.docket();
      const start = t.clock.now();
      await d.enqueue("mail", {}, { queue: "a", runAt: start - 5_000 });
      await d.enqueue("mail", {}, { queue: "a" });
      await d.enqueue("mail", {}, { queue: "a", delay: 60_000 });
      await d.enqueue("sms", {}, { queue: "b", concurrency: { key: "user-1", limit: 1 } });
      await d.enqueue("sms", {}, { queue: "b", concurrency: { key: "user-1", limit: 1 } });
      await d.enqueue("sms", {}, { queue: "c", maxAttempts: 1 });
      await d.setQueueCap("a", 2);
      await d.pauseQueue("b");
      await d.setTaskCap("sms", 5);
      const now = t.clock.advance(1_000);
      const [running] = await t.adapter.claim({ queues: ["c"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      assert.ok(running);
      const s = await d.stats();
      assert.equal(s.at, now);
      assert.deepEqual(s.queues.map((q) => q.queue), ["a", "b", "c"]);
      const [a, b, c] = s.queues;
      assert.deepEqual({ ready: a!.counts.ready, scheduled: a!.counts.scheduled, running: a!.counts.running }, { ready: 2, scheduled: 1, running: 0 });
      assert.equal(a!.oldestReadyAgeMs, 6_000);
      assert.equal(a!.maxRunning, 2);
      assert.equal(a!.paused, false);
      assert.deepEqual({ ready: b!.counts.ready, blocked: b!.counts.blocked, paused: b!.paused }, { ready: 1, blocked: 1, paused: true });
      assert.equal(c!.counts.running, 1);
      assert.equal(c!.oldestReadyAgeMs, 0);
      assert.deepEqual(s.tasks.map((x) => [x.task, x.counts.ready, x.counts.blocked, x.counts.running, x.maxRunning]), [
        ["mail", 2, 0, 0, null],
        ["sms", 1, 1, 1, 5],
      ]);
      assert.deepEqual(s.running, [
        { id: running.id, task: "sms", queue: "c", attempt: 1, concurrencyKey: null, worker: null, leaseExpiresAt: now + LEASE_MS, leaseExpiresInMs: LEASE_MS },
      ]);
      assert.deepEqual(s.keys, [{ key: "user-1", limit: 1, holders: 1, running: 0, blocked: 1 }]);
    },
  },
  {
    name: "stats › one snapshot: while another connection claims and completes jobs, every stats() counts each job once and lists as many running jobs as it counts",
    async run(t) {
      const d = t.docket();
      const total = 600;
      for (let i = 0; i < total; i += 200) await d.enqueueMany(Array.from({ length: 200 }, (_, k) => ({ task: "move", payload: { n: i + k }, options: { queue: "snap" } })));
      const mover = await t.connect();
      let moving = true;
      const moved = (async () => {
        try {
          for (;;) {
            const now = t.clock.now();
            const claimed = await mover.claim({ queues: ["snap"], limit: 20, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
            if (claimed.length === 0) return;
            await Promise.all(claimed.map((j) => settleOne(mover, { kind: "complete", id: j.id, leaseToken: j.leaseToken!, now })));
          }
        } finally {
          moving = false;
        }
      })();
      const seen: string[] = [];
      let samples = 0;
      while (moving || samples === 0) {
        const s = await d.stats({ runningLimit: 1_000 });
        samples++;
        const q = s.queues.find((x) => x.queue === "snap");
        const counted = q ? Object.values(q.counts).reduce((a, b) => a + b, 0) : 0;
        const running = s.running.filter((r) => r.queue === "snap").length;
        if (counted !== total || running !== (q?.counts.running ?? 0)) seen.push(`sample ${samples}: ${counted} counted, ${running} listed running of ${q?.counts.running ?? 0} counted`);
      }
      await moved;
      assert.deepEqual(seen, [], `${seen.length} of ${samples} samples were not one snapshot`);
    },
  },
  {
    name: "stats › jobs waiting for their parents are counted as waiting, per queue and task",
    async run(t) {
      const d = t.docket();
      const parent = await d.enqueue("charge", {}, { queue: "flow" });
      await d.enqueue("invoice", {}, { queue: "flow", after: [parent.id] });
      await d.enqueue("invoice", {}, { queue: "mail", after: [parent.id] });
      const s = await d.stats();
      assert.deepEqual(s.queues.map((q) => [q.queue, q.counts.waiting, q.counts.ready]), [["flow", 1, 1], ["mail", 1, 0]]);
      assert.deepEqual(s.tasks.map((x) => [x.task, x.counts.waiting, x.counts.ready]), [["charge", 0, 1], ["invoice", 2, 0]]);
    },
  },
  {
    name: "stats › throughput counts finished jobs per bucket over the window, oldest first, zeros included; older ones are left out",
    async run(t) {
      const d = t.docket();
      const minute = 60_000;
      t.clock.set(100 * minute);
      const finish = async (how: "complete" | "bury" | "cancel") => {
        const job = await d.enqueue("t", {}, { maxAttempts: 1 });
        if (how === "cancel") return void (await d.cancel(job.id));
        const now = t.clock.now();
        const leaseToken = token();
        const [c] = await t.adapter.claim({ queues: ["default"], limit: 1, now, leaseToken, leaseExpiresAt: now + LEASE_MS });
        assert.equal(c?.id, job.id);
        if (how === "complete") assert.ok(await settleOne(t.adapter, { kind: "complete", id: job.id, leaseToken, now }));
        else assert.ok(await settleOne(t.adapter, { kind: "fail", id: job.id, leaseToken, now, error: "boom", retryAt: null }));
      };
      await finish("complete"); // minute 100: outside a 3-minute window read at 103:30
      t.clock.set(101 * minute + 10);
      await finish("complete");
      await finish("complete");
      await finish("bury");
      t.clock.set(103 * minute + 5);
      await finish("cancel");
      t.clock.set(103 * minute + 30_000);
      const s = await d.stats({ windowMs: 3 * minute });
      assert.equal(s.bucketMs, minute);
      assert.deepEqual(s.throughput, [
        { start: 100 * minute, succeeded: 0, dead: 0, cancelled: 0 },
        { start: 101 * minute, succeeded: 2, dead: 1, cancelled: 0 },
        { start: 102 * minute, succeeded: 0, dead: 0, cancelled: 0 },
        { start: 103 * minute, succeeded: 0, dead: 0, cancelled: 1 },
      ]);
      const all = s.queues.find((q) => q.queue === "default")!.counts;
      // Succeeded and cancelled count the window (the minute-100 job is not in it); dead counts every dead job.
      assert.deepEqual({ succeeded: all.succeeded, dead: all.dead, cancelled: all.cancelled }, { succeeded: 2, dead: 1, cancelled: 1 });
    },
  },
  {
    name: "stats › a key's holders count its ready and running jobs, and of them the running ones apart",
    async run(t) {
      const d = t.docket();
      for (let i = 0; i < 4; i++) await d.enqueue("sync", {}, { queue: "keyed", concurrency: { key: "account-1", limit: 3 } });
      const now = t.clock.now();
      const claimed = await t.adapter.claim({ queues: ["keyed"], limit: 2, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      assert.equal(claimed.length, 2);
      assert.deepEqual((await d.stats()).keys, [{ key: "account-1", limit: 3, holders: 3, running: 2, blocked: 1 }]);
    },
  },
  {
    name: "stats › an empty store gives empty lists and a zero-filled window; bad options are InvalidArgumentError",
    async run(t) {
      const d = t.docket();
      const s = await d.stats({ windowMs: 120_000, bucketMs: 60_000 });
      assert.deepEqual([s.queues, s.tasks, s.running, s.keys], [[], [], [], []]);
      assert.ok(s.throughput.length >= 2 && s.throughput.every((b) => b.succeeded + b.dead + b.cancelled === 0));
      for (const bad of [{ bucketMs: 10 }, { windowMs: 1_000, bucketMs: 60_000 }, { windowMs: 10_000_000, bucketMs: 1_000 }, { runningLimit: 0 }, { nope: 1 }]) {
        await assert.rejects(d.stats(bad as never), InvalidArgumentError, JSON.stringify(bad));
      }
    },
  },
];
