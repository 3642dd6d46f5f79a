import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import { InvalidArgumentError } from "../../core/errors.ts";
import type { DocketEvent } from "../../core/events.ts";
import type { ConformanceCase } from "../harness.ts";
import { LEASE_MS, eventually, token } from "./helpers.ts";

const summary = (events: DocketEvent[]) => events.map((e) => `${e.type}${"job" in e ? ` #${e.job.id}` : ""}`);

/** The docket-level event stream: each change reported once, by the call that made it. */
export const eventCases: ConformanceCase[] = [
  {
    name: "events › enqueued (created only), cancelled, replayed and reclaimed are reported once each, by the call that won",
    async run(t) {
      const d = t.docket();
      const events: DocketEvent[] = [];
      d.on("*", (e) => void events.push(e));
      const a = await d.enqueue("t", {}, { idempotencyKey: "order-1" });
      await d.enqueue("t", {}, { idempotencyKey: "order-1" });
      const b = await d.enqueue("t", {}, { delay: 60_000 });
      await d.cancel(b.id);
      await assert.rejects(d.cancel(b.id));
      const c = await d.enqueue("t", {}, { maxAttempts: 1 });
      const now = t.clock.now();
      const claimed = await t.adapter.claim({ queues: ["default"], limit: 2, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      assert.deepEqual(claimed.map((j) => j.id).sort((x, y) => x - y), [a.id, c.id]);
      t.clock.advance(LEASE_MS + 1);
      const other = new Docket({ adapter: await t.connect(), clock: t.clock });
      const [mine, theirs] = await Promise.all([d.reclaimExpired(), other.reclaimExpired()]);
      assert.equal(mine.retried + mine.dead + theirs.retried + theirs.dead, 2);
      await d.deadLetters.replay(c.id);
      await assert.rejects(d.deadLetters.replay(c.id));
      const reclaimedHere = mine.retried + mine.dead;
      const expected = [`enqueued #${a.id}`, `enqueued #${b.id}`, `cancelled #${b.id}`, `enqueued #${c.id}`];
      assert.deepEqual(summary(events).slice(0, 4), expected);
      assert.equal(events.filter((e) => e.type === "reclaimed").length, reclaimedHere, "a reclaim is reported by the docket whose sweep won it");
      assert.deepEqual(summary(events.filter((e) => e.type === "replayed")), [`replayed #${c.id}`]);
      const replayed = events.find((e) => e.type === "replayed");
      assert.ok(replayed && replayed.type === "replayed" && replayed.job.state === "scheduled" && replayed.at === t.clock.now());
    },
  },
  {
    name: "events › two workers in one process: every job is reported started and succeeded exactly once in total; retried and dead carry the error",
    slow: true,
    async run(t) {
      const dockets = [new Docket({ adapter: t.adapter }), new Docket({ adapter: await t.connect() })];
      const events: DocketEvent[] = [];
      for (const d of dockets) d.on("*", (e) => void events.push(e));
      const ids: number[] = [];
      for (let i = 0; i < 30; i++) ids.push((await dockets[0]!.enqueue("ok", { i })).id);
      const failing = await dockets[0]!.enqueue("boom", {}, { maxAttempts: 2, backoff: { baseMs: 1, maxMs: 1, jitter: 0 } });
      const workers = dockets.map((d) =>
        d.worker({ pollMs: 10, logger: null, concurrency: 4, handlers: { ok: () => "done", boom: () => Promise.reject(new Error("kaput")) } }),
      );
      for (const w of workers) await w.start();
      try {
        await eventually(async () => events.filter((e) => e.type === "succeeded").length === 30 && events.some((e) => e.type === "dead"), 15_000, "all jobs finished");
      } finally {
        for (const w of workers) await w.stop();
      }
      const count = (type: DocketEvent["type"], id: number) => events.filter((e) => e.type === type && "job" in e && e.job.id === id).length;
      for (const id of ids) {
        assert.equal(count("started", id), 1, `job ${id} started`);
        assert.equal(count("succeeded", id), 1, `job ${id} succeeded`);
      }
      assert.equal(count("started", failing.id), 2);
      const retried = events.find((e) => e.type === "retried");
      const dead = events.find((e) => e.type === "dead");
      assert.ok(retried?.type === "retried" && retried.job.id === failing.id && /kaput/.test(retried.error));
      assert.ok(dead?.type === "dead" && dead.job.id === failing.id && /kaput/.test(dead.error) && dead.job.state === "dead");
      const succeeded = events.find((e) => e.type === "succeeded");
      assert.ok(succeeded?.type === "succeeded" && succeeded.job.result === "done");
    },
  },
  {
    name: "events › a listener that throws affects neither docket nor other listeners; unsubscribing stops delivery; an unknown type is InvalidArgumentError",
    async run(t) {
      const d = t.docket();
      const seen: number[] = [];
      d.on("enqueued", () => {
        throw new Error("observer bug");
      });
      const off = d.on("enqueued", (e) => void seen.push(e.job.id));
      const first = await d.enqueue("t", {});
      off();
      await d.enqueue("t", {});
      assert.deepEqual(seen, [first.id]);
      assert.throws(() => d.on("finished" as never, () => undefined), InvalidArgumentError);
      assert.throws(() => d.on("enqueued", "nope" as never), InvalidArgumentError);
    },
  },
];
