import assert from "node:assert/strict";
import { Docket, type TaskMap } from "../../client/docket.ts";
import type { ConformanceCase } from "../harness.ts";
import { eventually } from "./helpers.ts";

const FAST = { pollMs: 10, leaseMs: 400, heartbeatMs: 50, reclaimMs: 50 };
const RETRY = { baseMs: 5, jitter: 0 };

type Level = "info" | "warn" | "error";

/** A logger with every level, keeping each line with its level. */
function recorder() {
  const lines: { level: Level; message: string }[] = [];
  const at = (level: Level) => (message: string) => void lines.push({ level, message });
  return {
    lines,
    logger: { info: at("info"), warn: at("warn"), error: at("error") },
    /** Lines about job `id` ("job <id> ("), as "level: message". */
    about: (id: number) => lines.filter((l) => l.message.includes(`job ${id} (`)).map((l) => `${l.level}: ${l.message}`),
  };
}

/** A handler that runs until its signal aborts. */
const untilAborted = (_p: unknown, ctx: { signal: AbortSignal }) => new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve()));

export const workerLoggingCases: ConformanceCase[] = [
  {
    name: "worker › without queues, a worker takes jobs from the queues its handled tasks are registered to (and a fallback worker from all of them)",
    slow: true,
    async run(t) {
      const tasks = { "email.send": { queue: "mail" }, "report.build": {} };
      const d = new Docket<TaskMap>({ adapter: t.adapter, tasks, retry: RETRY });
      const mail = await d.enqueue("email.send", {});
      const report = await d.enqueue("report.build", {});
      const w = d.worker({ ...FAST, logger: null, handlers: { "email.send": () => "sent", "report.build": () => "built" } });
      await w.start();
      try {
        await eventually(async () => (await d.get(mail.id))?.state === "succeeded", 3_000, "the email.send job (queue mail) ran on a worker given no queues");
        await eventually(async () => (await d.get(report.id))?.state === "succeeded", 3_000, "the report.build job (default queue) ran");
      } finally {
        await w.stop();
      }
      const again = await d.enqueue("email.send", {});
      const catchAll = d.worker({ ...FAST, logger: null, handlers: {}, fallback: () => "any" });
      await catchAll.start();
      try {
        await eventually(async () => (await d.get(again.id))?.state === "succeeded", 3_000, "a fallback worker given no queues ran the email.send job");
      } finally {
        await catchAll.stop();
      }
    },
  },
  {
    name: "worker › explicit queues without a handled task's registered queue: one warning at start naming the task and its queue",
    slow: true,
    async run(t) {
      const d = new Docket<TaskMap>({ adapter: t.adapter, tasks: { "email.send": { queue: "mail" }, "report.build": {} } });
      const log = recorder();
      const handlers = { "email.send": () => undefined, "report.build": () => undefined };
      const w = d.worker({ ...FAST, queues: ["default"], logger: log.logger, handlers });
      await w.start();
      await w.start();
      await w.stop();
      await w.start();
      await w.stop();
      const warned = log.lines.filter((l) => l.level === "warn" && l.message.includes("email.send"));
      assert.equal(warned.length, 1, `one warning, got ${JSON.stringify(log.lines)}`);
      assert.match(warned[0]!.message, /"mail"/);
      assert.doesNotMatch(warned[0]!.message, /report\.build/);
      const fine = recorder();
      const w2 = d.worker({ ...FAST, queues: ["mail", "default"], logger: fine.logger, handlers });
      await w2.start();
      await w2.stop();
      assert.deepEqual(fine.lines, []);
    },
  },
  {
    name: "worker › logger: info and error are optional and must be functions when given; console fits",
    async run(t) {
      const d = t.docket();
      const handlers = { t: () => undefined };
      d.worker({ handlers, logger: console });
      d.worker({ handlers, logger: { warn: () => undefined } });
      for (const logger of [{ warn: () => undefined, info: 5 }, { warn: () => undefined, error: "loud" }, { info: () => undefined }]) {
        assert.throws(
          () => d.worker({ handlers, logger: logger as never }),
          (e: { code?: string; message?: string }) => e.code === "INVALID_ARGUMENT" && /logger/.test(e.message ?? ""),
          JSON.stringify(Object.keys(logger)),
        );
      }
    },
  },
  {
    name: "worker › a failed attempt logs one warning line (job, task, attempt n/max, error, cut when long); the last one logs at error level as dead",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter, retry: RETRY });
      const job = await d.enqueue("email.send", {}, { maxAttempts: 2 });
      const log = recorder();
      const w = d.worker({ ...FAST, logger: log.logger, handlers: { "email.send": () => { throw new Error(`smtp refused ${"x".repeat(5_000)}`); } } });
      await w.start();
      try {
        await eventually(async () => (await d.get(job.id))?.state === "dead", 5_000, "the job is dead after 2 attempts");
        await eventually(async () => log.about(job.id).length >= 2, 2_000, `two lines about job ${job.id}`);
      } finally {
        await w.stop();
      }
      const lines = log.about(job.id);
      assert.equal(lines.length, 2, JSON.stringify(lines));
      assert.match(lines[0]!, new RegExp(`^warn: .*job ${job.id} \\(email\\.send\\) attempt 1/2 .*smtp refused`));
      assert.match(lines[1]!, new RegExp(`^error: .*job ${job.id} \\(email\\.send\\) attempt 2/2 .*dead.*smtp refused`));
      for (const line of lines) {
        assert.doesNotMatch(line, /\n/);
        assert.ok(line.length < 600, `a short line, got ${line.length} characters`);
      }
    },
  },
  {
    name: "worker › a cancel during a run logs at info 'cancelled' (this docket's cancel, and one from another connection), never a warning",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter, retry: RETRY });
      const other = new Docket({ adapter: await t.connect() });
      const here = await d.enqueue("long", {}, { maxAttempts: 3 });
      const there = await d.enqueue("long", {}, { maxAttempts: 3 });
      const log = recorder();
      const w = d.worker({ ...FAST, concurrency: 2, logger: log.logger, handlers: { long: untilAborted } });
      await w.start();
      try {
        await eventually(async () => (await d.list({ state: "running" })).length === 2, 5_000, "both jobs running");
        await d.cancel(here.id);
        await other.cancel(there.id);
        await eventually(async () => log.about(here.id).length > 0 && log.about(there.id).length > 0, 5_000, "a line about each cancelled job");
      } finally {
        await w.stop();
      }
      for (const id of [here.id, there.id]) {
        assert.deepEqual(log.about(id).map((l) => l.replace(/job \d+ /, "job N ")), ["info: docket worker: job N (long) attempt 1/3 cancelled"]);
      }
    },
  },
  {
    name: "worker › an attempt ended by its timeout says 'timeout' in its log line",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter, retry: RETRY });
      const job = await d.enqueue("slow", {}, { timeoutMs: 50, maxAttempts: 1 });
      const log = recorder();
      const w = d.worker({ ...FAST, logger: log.logger, handlers: { slow: untilAborted } });
      await w.start();
      try {
        await eventually(async () => log.about(job.id).length > 0, 5_000, "a line about the timed-out job");
      } finally {
        await w.stop();
      }
      const [line] = log.about(job.id);
      assert.match(line!, new RegExp(`^error: .*job ${job.id} \\(slow\\) attempt 1/1 .*timeout.*dead`));
    },
  },
  {
    name: "worker › an attempt whose lease a sweep reclaimed logs a warning saying reclaimed (lease expired)",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter, retry: RETRY });
      // Another process whose sweep runs two minutes later than now: every lease held now has expired for it.
      const later = new Docket({ adapter: await t.connect(), retry: RETRY, clock: { now: () => Date.now() + 120_000 } });
      const job = await d.enqueue("stuck", {}, { maxAttempts: 3 });
      const log = recorder();
      const w = d.worker({ ...FAST, leaseMs: 60_000, heartbeatMs: 20_000, reclaimMs: 30_000, logger: log.logger, handlers: { stuck: untilAborted } });
      await w.start();
      try {
        await eventually(async () => (await d.get(job.id))?.state === "running", 5_000, "job running");
        assert.deepEqual(await later.reclaimExpired(), { retried: 1, dead: 0 });
        await eventually(async () => log.about(job.id).length > 0, 5_000, "a line about the reclaimed job");
      } finally {
        await w.stop();
      }
      const [line] = log.about(job.id);
      assert.match(line!, new RegExp(`^warn: .*job ${job.id} \\(stuck\\) attempt 1/3 .*reclaim.*lease expired`));
    },
  },
];
