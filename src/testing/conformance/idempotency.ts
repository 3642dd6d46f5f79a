import assert from "node:assert/strict";
import type { DocketAdapter } from "../../core/adapter.ts";
import { Docket } from "../../client/docket.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { claimOne } from "./helpers.ts";
import { settleOne } from "../lease-writes.ts";

const isInvalid = (e: { code?: string }) => e.code === "INVALID_ARGUMENT";

/** An IdempotencyConflictError naming the holder's task (and, when given, the holder's id). */
function isConflict(heldBy: string, id?: number) {
  return (e: { code?: string; message?: string }) => {
    assert.equal(e.code, "IDEMPOTENCY_CONFLICT", e.message);
    assert.match(e.message ?? "", new RegExp(`held by ${id === undefined ? "" : `job ${id} `}.*of task ${JSON.stringify(heldBy)}`));
    return true;
  };
}

async function count(t: CaseContext): Promise<number> {
  return (await t.adapter.list({ limit: 100_000 })).length;
}

/** Idempotency keys: one job per held key, the holder returned to later callers (R12, I8). */
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
      await settleOne(t.adapter, { kind: "complete", id: running.id, leaseToken: running.leaseToken!, now: t.clock.now() });
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
  {
    name: "idempotency › a key held by another task's job is IdempotencyConflictError, in enqueue and enqueueMany, and the refused call writes nothing",
    async run(t) {
      const d = t.docket();
      const email = await d.enqueue("email.send", { to: "a" }, { idempotencyKey: "k1" });
      await assert.rejects(d.enqueue("report.build", {}, { idempotencyKey: "k1" }), isConflict("email.send", email.id));
      const concurrency = { key: "acct", limit: 1 };
      // Items before and after the conflicting one, new keys, concurrency keys: the whole batch is refused.
      await assert.rejects(
        d.enqueueMany([
          { task: "report.build", payload: { i: 0 }, options: { idempotencyKey: "k2", concurrency } },
          { task: "report.build", payload: { i: 1 } },
          { task: "report.build", payload: { i: 2 }, options: { idempotencyKey: "k1" } },
          { task: "report.build", payload: { i: 3 }, options: { concurrency } },
        ]),
        isConflict("email.send", email.id),
      );
      // Two items of one call with one key and different tasks.
      await assert.rejects(
        d.enqueueMany([
          { task: "a", payload: {}, options: { idempotencyKey: "k3" } },
          { task: "b", payload: {}, options: { idempotencyKey: "k3" } },
        ]),
        isConflict("a"),
      );
      assert.deepEqual((await t.adapter.list({ limit: 100 })).map((j) => j.id), [email.id], "the refused calls stored nothing");
      assert.equal(await d.getByIdempotencyKey("k2"), null);
      assert.equal((await d.enqueue("x", {}, { concurrency })).state, "ready", "the refused batch holds no slot of its concurrency key");
      const same = await d.enqueue("email.send", { to: "b" }, { idempotencyKey: "k1" });
      assert.deepEqual([same.id, same.created, same.task], [email.id, false, "email.send"], "the same task still gets the holder");
    },
  },
  {
    name: "idempotency › concurrent enqueues of two tasks with one key: one job; callers of its task get it, the others IdempotencyConflictError, and their batches store nothing",
    async run(t) {
      const adapters: DocketAdapter[] = [t.adapter];
      for (let i = 0; i < 3; i++) adapters.push(await t.connect());
      const dockets = adapters.map((adapter) => new Docket({ adapter, clock: t.clock }));
      let stored = 0;
      for (let round = 0; round < 8; round++) {
        const key = `k${round}`;
        const outcomes = await Promise.allSettled(
          dockets.map((d, i) => {
            const task = i % 2 === 0 ? "a" : "b";
            return d.enqueueMany([{ task, payload: { i } }, { task, payload: { i }, options: { idempotencyKey: key } }]);
          }),
        );
        const fulfilled = outcomes.flatMap((o) => (o.status === "fulfilled" ? [o.value] : []));
        const refused = outcomes.flatMap((o) => (o.status === "rejected" ? [o.reason as { code?: string; message?: string }] : []));
        const keyed = fulfilled.map((r) => r[1]!);
        assert.equal(keyed.filter((j) => j.created).length, 1, `round ${round}: exactly one caller created the job`);
        const holder = keyed.find((j) => j.created)!;
        assert.ok(keyed.every((j) => j.id === holder.id && j.task === holder.task), `round ${round}: every caller that succeeded got the holder, of its own task`);
        assert.equal(fulfilled.length, 2, `round ${round}: the two callers of the holder's task succeeded`);
        for (const e of refused) isConflict(holder.task, holder.id)(e);
        stored += 1 + fulfilled.length;
      }
      const all = await t.adapter.list({ limit: 1000 });
      assert.equal(all.filter((j) => j.idempotencyKey !== null).length, 8);
      assert.equal(all.length, stored, "a refused batch stored none of its jobs");
    },
  },
];
