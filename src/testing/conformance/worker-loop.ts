import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import type { WorkerEvent } from "../../worker/index.ts";
import type { ConformanceCase } from "../harness.ts";
import { withFaults } from "./faults.ts";
import { eventually, sleep } from "./helpers.ts";

const FAST = { pollMs: 10, leaseMs: 400, heartbeatMs: 50, reclaimMs: 50, logger: null };

export const workerLoopCases: ConformanceCase[] = [
  {
    // A claim elsewhere may pass over the rows a staging transaction holds (SKIP LOCKED) and go idle: it must hear of them.
    name: "notices › a due job that a claim stages to ready is announced to the other stores' listeners",
    slow: true,
    async run(t) {
      const other = await t.connect();
      assert.ok(other.onReady, `${other.name} has no ready notices`);
      await other.get({ id: 1 }); // opens its connection: a store checks for notices once it has one
      const heard: unknown[] = [];
      const off = other.onReady((n) => void heard.push(n));
      try {
        const d = t.docket();
        const job = await d.enqueue("later", {}, { queue: "late", delay: 1_000 });
        assert.equal((await d.get(job.id))?.state, "scheduled");
        await sleep(300); // the enqueue's own notice has arrived (MariaDB's wake counter is read every 25 ms)
        heard.length = 0;
        const now = t.clock.advance(2_000);
        await t.adapter.claim({ queues: ["elsewhere"], limit: 1, now, leaseToken: "stager", leaseExpiresAt: now + 30_000 });
        assert.equal((await d.get(job.id))?.state, "ready", "the claim staged the due job");
        await eventually(async () => heard.length > 0, 3_000, "the other store heard that the staged job is ready");
      } finally {
        off();
      }
    },
  },
  {
    // A synchronous driver resolves every statement without a macrotask: the worker loop must still yield to timers.
    name: "worker › timers keep firing and heartbeats are written while a backlog drains",
    slow: true,
    // 20,000 jobs: about 3 s on MariaDB when it is quick; on a loaded server the drain alone took 20–40 s.
    timeoutMs: 180_000,
    async run(t) {
      const faulty = withFaults(t.adapter);
      const d = new Docket({ adapter: faulty.adapter });
      const backlog = 20_000; // long enough to drain over several 20 ms ticks at full speed (5,000 took ~60 ms on SQLite)
      await d.enqueue("hold", {}, { priority: -1 });
      await d.enqueueMany(Array.from({ length: backlog }, (_, i) => ({ task: "noop", payload: i })));
      let handled = 0;
      let ticks = 0;
      let heartbeatsBefore = 0;
      let heartbeatsDuring = -1;
      let drained!: () => void;
      const allHandled = new Promise<void>((r) => (drained = r));
      const interval = setInterval(() => void (handled < backlog && ticks++), 20);
      const w = d.worker({
        ...FAST,
        // A lease the worker can hold over a buffer of 2,000 claimed jobs on a slow store (Galera): a handler starts only
        // on a fresh lease (Executor.startBuffered), and with FAST's 400 ms they would wait for renewals, not for timers.
        leaseMs: 5_000,
        concurrency: 8,
        handlers: {
          hold: () => allHandled,
          noop: () => {
            if (handled === 0) heartbeatsBefore = faulty.calls.get("heartbeat") ?? 0;
            if (++handled === backlog) {
              heartbeatsDuring = (faulty.calls.get("heartbeat") ?? 0) - heartbeatsBefore;
              drained();
            }
          },
        },
      });
      try {
        await w.start();
        await allHandled;
        const succeeded = async () => (await d.stats()).queues.reduce((n, q) => n + q.counts.succeeded, 0);
        await eventually(async () => (await succeeded()) === backlog + 1, 60_000, "all jobs succeeded");
      } finally {
        clearInterval(interval);
        await w.stop();
      }
      assert.ok(ticks >= 3, `a 20 ms interval fired ${ticks} times while ${backlog} jobs drained`);
      assert.ok(heartbeatsDuring >= 1, `heartbeats written while the backlog drained: ${heartbeatsDuring}`);
    },
  },
  {
    // During a rolling deploy, old workers must not spend attempts of tasks they have no handler for.
    name: "worker › claims only jobs of tasks it has handlers for; a fallback worker claims every task",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter });
      const unknown = await d.enqueue("new.task", {}, { priority: -1 });
      const known = await d.enqueue("old.task", {});
      const old = d.worker({ ...FAST, handlers: { "old.task": () => undefined } });
      await old.start();
      await eventually(async () => (await d.get(known.id))?.state === "succeeded", 10_000, "known task ran");
      await sleep(100); // several more claim polls
      await old.stop();
      const waiting = await d.get(unknown.id);
      assert.equal(waiting?.state, "ready");
      assert.equal(waiting?.attempt, 0);
      assert.equal(waiting?.lastError, null);
      const seen: string[] = [];
      const catchAll = d.worker({ ...FAST, handlers: {}, fallback: (_p, ctx) => void seen.push(ctx.job.task) });
      await catchAll.start();
      await eventually(async () => (await d.get(unknown.id))?.state === "succeeded", 10_000, "fallback ran the new task");
      await catchAll.stop();
      assert.deepEqual(seen, ["new.task"]);
    },
  },
  {
    // A hung handler in a live process must not hold its job forever: its timeout aborts it.
    name: "worker › a handler past its job's timeoutMs is aborted and the attempt fails with a timeout reason",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter, retry: { baseMs: 5, jitter: 0 } });
      const perJob = await d.enqueue("hang", {}, { timeoutMs: 100, maxAttempts: 1 });
      const byWorker = await d.enqueue("hang", {}, { maxAttempts: 1 });
      let aborted = 0;
      const events: WorkerEvent[] = [];
      const w = d.worker({
        ...FAST,
        timeoutMs: 150,
        onEvent: (e) => events.push(e),
        handlers: {
          hang: (_p, ctx) =>
            new Promise(() => ctx.signal.addEventListener("abort", () => void aborted++)), // never settles
        },
      });
      await w.start();
      await eventually(async () => (await d.deadLetters.list()).length === 2, 10_000, "both attempts failed");
      await w.stop({ timeoutMs: 0 });
      assert.match((await d.get(perJob.id))?.lastError ?? "", /timed out after 100 ms/);
      assert.match((await d.get(byWorker.id))?.lastError ?? "", /timed out after 150 ms/);
      assert.equal(aborted, 2);
      assert.equal(events.filter((e) => e.type === "dead").length, 2);
    },
  },
  {
    // An enqueue in the worker's own process wakes it.
    name: "worker › a job enqueued through the worker's own docket starts at once, not at the next poll",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter });
      const ran: number[] = [];
      const w = d.worker({ ...FAST, pollMs: 600_000, handlers: { now: (p) => void ran.push(p as number) } });
      await w.start();
      await sleep(100); // the first claim found nothing: the worker sleeps for pollMs (10 minutes)
      const other = await d.enqueue("now", 0, { queue: "elsewhere" });
      const job = await d.enqueue("now", 1);
      try {
        await eventually(async () => (await d.get(job.id))?.state === "succeeded", 5_000, "the job ran long before the 10-minute poll");
      } finally {
        await w.stop();
      }
      assert.deepEqual(ran, [1]);
      assert.equal((await d.get(other.id))?.state, "ready", "a job of a queue the worker does not serve stays");
    },
  },
  {
    // A control change that lets waiting jobs start wakes the workers, in this process (its docket) and in others (the store's notice).
    name: "worker › a resumed queue or a removed queue or task rate limit starts waiting jobs at once, not at the next poll, whichever docket changed it",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter });
      const other = new Docket({ adapter: await t.connect() });
      const ran: string[] = [];
      const w = d.worker({ ...FAST, pollMs: 600_000, handlers: { a: (p) => void ran.push(p as string), b: (p) => void ran.push(p as string) } });
      const ranSoon = async (id: number, what: string) => {
        await eventually(async () => (await d.get(id))?.state === "succeeded", 5_000, `${what}: the job ran long before the 10-minute poll`);
      };
      await w.start();
      try {
        for (const [changer, name] of [[d, "own docket"], [other, "another connection"]] as const) {
          await changer.pauseQueue("default");
          const paused = await d.enqueue("a", `paused via ${name}`);
          await sleep(100); // the worker's claims found nothing it may take: it sleeps for pollMs
          await changer.resumeQueue("default");
          await ranSoon(paused.id, `resume via ${name}`);

          await changer.setQueueRateLimit("default", { limit: 1, periodMs: 3_600_000 });
          const first = await d.enqueue("a", `first via ${name}`);
          await ranSoon(first.id, `rate limit via ${name}`);
          const held = await d.enqueue("a", `held via ${name}`);
          await sleep(100);
          assert.equal((await d.get(held.id))?.state, "ready", "held by the rate limit");
          await changer.setQueueRateLimit("default", null);
          await ranSoon(held.id, `removed rate limit via ${name}`);

          await changer.setTaskRateLimit("b", { limit: 1, periodMs: 3_600_000 });
          const taskFirst = await d.enqueue("b", `task's first via ${name}`);
          await ranSoon(taskFirst.id, `task rate limit via ${name}`);
          const taskHeld = await d.enqueue("b", `task's held via ${name}`);
          await sleep(100);
          assert.equal((await d.get(taskHeld.id))?.state, "ready", "held by the task's rate limit");
          await changer.setTaskRateLimit("b", null);
          await ranSoon(taskHeld.id, `removed task rate limit via ${name}`);
        }
      } finally {
        await w.stop();
      }
      assert.equal(ran.length, 10);
    },
  },
];
