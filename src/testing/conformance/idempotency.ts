import assert from "node:assert/strict";
import type { DocketAdapter } from "../../core/adapter.ts";
import { Docket } from "../../core/docket.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { claimOne } from "./helpers.ts";

const isInvalid = (e: { code?: string }) => e.code === "INVALID_ARGUMENT";

async function count(t: CaseContext): Promise<number> {
  return (await t.adapter.list({ limit: 100_000 })).length;
}

/** Issue 10 item 1: idempotency keys (R12, I8). */
export const idempotencyCases: ConformanceCase[] = [
  {
    name: "idempotency › an enqueue with a held key stores nothing and returns the holder with created: false; getByIdempotencyKey finds it",
    async run(t) {
      const d = t.docket();
      const first = await d.enqueue("t", { n: 1 }, { idempotencyKey: "order-1" });
      assert.equal(first.created, true);
      assert.equal(first.idempotencyKey, "order-1");
      const again = await d.enqueue("t", { n: 2 }, { idempotencyKey: "order-1", queue: "other" });
      assert.equal(again.created, false);
      assert.equal(again.id, first.id);
      assert.deepEqual(again.payload, { n: 1 }, "the holder as stored, not the second call's job");
      const plain = await d.enqueue("t", {});
      assert.equal(plain.created, true);
      assert.equal(plain.idempotencyKey, null);
      assert.equal((await d.getByIdempotencyKey("order-1"))?.id, first.id);
      assert.equal(await d.getByIdempotencyKey("order-2"), null);
      assert.equal(await count(t), 2);
    },
  },
  {
    name: "idempotency › in one enqueueMany a repeated key gets the first item's job, and keys work beside concurrency keys",
    async run(t) {
      const d = t.docket();
      const concurrency = { key: "acct", limit: 1 };
      const jobs = await d.enqueueMany([
        { task: "t", payload: { i: 0 }, options: { idempotencyKey: "a", concurrency } },
        { task: "t", payload: { i: 1 }, options: { idempotencyKey: "b", concurrency } },
        { task: "t", payload: { i: 2 }, options: { idempotencyKey: "a", concurrency } },
        { task: "t", payload: { i: 3 } },
      ]);
      assert.deepEqual(jobs.map((j) => j.created), [true, true, false, true]);
      assert.equal(jobs[2]!.id, jobs[0]!.id);
      assert.deepEqual(jobs.map((j) => j.state), ["ready", "blocked", "ready", "ready"], "the repeat took no slot and was not blocked");
      const replay = await d.enqueue("t", { i: 4 }, { idempotencyKey: "b", concurrency });
      assert.equal(replay.created, false);
      assert.equal(replay.state, "blocked");
      assert.equal(await count(t), 3);
    },
  },
  {
    name: "idempotency › concurrent enqueues with one key on separate connections create one job; every caller gets it and none fails",
    async run(t) {
      const adapters: DocketAdapter[] = [t.adapter];
      for (let i = 0; i < 4; i++) adapters.push(await t.connect());
      const dockets = adapters.map((adapter) => new Docket({ adapter, clock: t.clock }));
      for (let round = 0; round < 10; round++) {
        const key = `k${round}`;
        const results = await Promise.all(dockets.map((d, i) => d.enqueueMany([{ task: "t", payload: { i } }, { task: "t", payload: { i }, options: { idempotencyKey: key } }])));
        const keyed = results.map((r) => r[1]!);
        assert.equal(keyed.filter((j) => j.created).length, 1, `round ${round}: exactly one caller created the job`);
        assert.equal(new Set(keyed.map((j) => j.id)).size, 1, `round ${round}: every caller got the same job`);
      }
      const all = await t.adapter.list({ limit: 1000 });
      assert.equal(all.filter((j) => j.idempotencyKey !== null).length, 10);
      assert.equal(all.length, 10 + 10 * adapters.length);
    },
  },
  {
    name: "idempotency › a key holds while its job is live and keyHoldAfterFinishMs after it finished; then a new job takes it over",
    async run(t) {
      const d = t.docket({ idempotency: { keyHoldAfterFinishMs: 1000 } });
      const first = await d.enqueue("t", {}, { idempotencyKey: "k" });
      const running = await claimOne(t);
      assert.equal(running.id, first.id);
      assert.equal((await d.enqueue("t", {}, { idempotencyKey: "k" })).created, false, "held while running");
      await t.adapter.complete({ id: running.id, leaseToken: running.leaseToken!, now: t.clock.now() });
      t.clock.advance(999);
      assert.equal((await d.enqueue("t", {}, { idempotencyKey: "k" })).id, first.id, "held until 1000 ms after it finished");
      t.clock.advance(1);
      const second = await d.enqueue("t", {}, { idempotencyKey: "k" });
      assert.equal(second.created, true);
      assert.notEqual(second.id, first.id);
      assert.equal((await d.getByIdempotencyKey("k"))?.id, second.id);
      assert.equal((await d.get(first.id))?.idempotencyKey, null, "the finished job gave its key up");
      const live = t.docket({ idempotency: { keyHoldAfterFinishMs: 0 } });
      await live.cancel(second.id);
      assert.equal((await live.enqueue("t", {}, { idempotencyKey: "k" })).created, true, "0: held only while live");
    },
  },
  {
    name: "idempotency › by default a key holds until its finished job is purged",
    async run(t) {
      const d = t.docket({ retention: { finishedMs: 1000 } });
      const first = await d.enqueue("t", {}, { idempotencyKey: "k" });
      await d.cancel(first.id);
      t.clock.advance(100_000);
      assert.equal((await d.enqueue("t", {}, { idempotencyKey: "k" })).created, false, "a finished job still holds its key");
      assert.deepEqual(await d.purgeFinished(), { deleted: 1 });
      const second = await d.enqueue("t", {}, { idempotencyKey: "k" });
      assert.equal(second.created, true);
    },
  },
  {
    name: "idempotency › a bad key or hold is InvalidArgumentError and writes nothing",
    async run(t) {
      const d = t.docket();
      for (const key of ["", "x".repeat(192), 7, "a "]) {
        await assert.rejects(d.enqueue("t", {}, { idempotencyKey: key as string }), isInvalid, JSON.stringify(key));
        await assert.rejects(d.enqueueMany([{ task: "t", payload: {} }, { task: "t", payload: {}, options: { idempotencyKey: key as string } }]), isInvalid);
      }
      await assert.rejects(d.getByIdempotencyKey(""), isInvalid);
      for (const keyHoldAfterFinishMs of [-1, 1.5, "1"]) {
        assert.throws(() => t.docket({ idempotency: { keyHoldAfterFinishMs: keyHoldAfterFinishMs as number } }), isInvalid);
      }
      assert.throws(() => t.docket({ idempotency: { holdMs: 1 } as never }), isInvalid);
      assert.equal(await count(t), 0);
    },
  },
];
