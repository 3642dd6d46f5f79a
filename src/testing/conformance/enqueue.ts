import assert from "node:assert/strict";
import { ClosedError, DocketError } from "../../core/errors.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { Docket } from "../../client/docket.ts";
import { newJob, sleep } from "./helpers.ts";

async function count(t: CaseContext): Promise<number> {
  return (await t.adapter.list({ limit: 10_000 })).length;
}

/** Asserts `fn` throws a DocketError with `code` and that nothing was written. */
async function rejectsAndWritesNothing(t: CaseContext, code: string, fn: () => Promise<unknown>): Promise<void> {
  const before = await count(t);
  await assert.rejects(fn, (e: unknown) => {
    assert.ok(e instanceof DocketError, `expected a DocketError, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    return true;
  });
  assert.equal(await count(t), before, "nothing may be written");
}

const circular: Record<string, unknown> = {};
circular.self = circular;

const BAD_PAYLOADS: [string, unknown][] = [
  ["a bigint", { n: 1n }],
  ["a function", { f: () => 1 }],
  ["undefined", undefined],
  ["an undefined property", { a: undefined }],
  ["NaN", { n: NaN }],
  ["Infinity", [Infinity]],
  ["a Date", { at: new Date(0) }],
  ["a Map", new Map()],
  ["a symbol", Symbol("s")],
  ["a circular object", circular],
];

const BAD_OPTIONS: [string, Record<string, unknown>][] = [
  ["a negative delay", { delay: -1 }],
  ["a NaN delay", { delay: NaN }],
  ["an infinite delay", { delay: Infinity }],
  ["an invalid runAt", { runAt: new Date("nope") }],
  ["both runAt and delay", { runAt: 0, delay: 1 }],
  ["a NaN priority", { priority: NaN }],
  ["an infinite priority", { priority: -Infinity }],
  ["a fractional priority", { priority: 1.5 }],
  ["maxAttempts 0", { maxAttempts: 0 }],
  ["an empty queue", { queue: "" }],
  ["a negative backoff", { backoff: { baseMs: -5 } }],
];

export const enqueueCases: ConformanceCase[] = [
  {
    name: "enqueue › stores a ready job with its payload, attempt 0 and no lease",
    async run(t) {
      const d = t.docket<{ "email.send": { to: string } }>();
      const job = await d.enqueue("email.send", { to: "a@b.c" }, { queue: "mail", priority: 3 });
      const got = await d.get(job.id);
      assert.ok(got);
      assert.deepEqual(got.payload, { to: "a@b.c" });
      assert.equal(got.state, "ready");
      assert.equal(got.queue, "mail");
      assert.equal(got.priority, 3);
      assert.equal(got.attempt, 0);
      assert.equal(got.leaseToken, null);
      assert.equal(got.runAt, t.clock.now());
    },
  },
  {
    name: "enqueue › the job enqueue returns is the stored job, field for field (one job, with options, and a batch)",
    async run(t) {
      const d = t.docket();
      const one = await d.enqueue("t", { text: "zürich ✓ \u{1F600}", n: [1, 2.5, null] }, { queue: "q1", priority: -2, delay: 250, maxAttempts: 7, backoff: { baseMs: 10 }, timeoutMs: 900 });
      const plain = await d.enqueue("t", "s");
      const batch = await d.enqueueMany([{ task: "t", payload: 1 }, { task: "u", payload: { a: 1 }, options: { priority: 4 } }]);
      for (const job of [one, plain, ...batch]) {
        const { created, ...returned } = job;
        assert.equal(created, true);
        assert.deepEqual(returned, await d.get(job.id));
      }
    },
  },
  {
    name: "enqueue › a delayed job is scheduled at now + delay; runAt in the past is ready",
    async run(t) {
      const d = t.docket();
      const later = await d.enqueue("t", null, { delay: 5000 });
      assert.equal(later.state, "scheduled");
      assert.equal(later.runAt, t.clock.now() + 5000);
      const past = await d.enqueue("t", null, { runAt: new Date(t.clock.now() - 1) });
      assert.equal(past.state, "ready");
    },
  },
  {
    name: "enqueue › every call after close() is ClosedError (code CLOSED), not the driver's error; close() again resolves",
    async run(t) {
      const adapter = await t.store.connect();
      const d = new Docket({ adapter, clock: t.clock });
      await d.enqueue("t", null);
      await adapter.close();
      await adapter.close();
      const closed = (e: unknown) => e instanceof ClosedError && e.code === "CLOSED";
      await assert.rejects(d.enqueue("t", null), closed);
      await assert.rejects(d.stats(), closed);
      await assert.rejects(d.list({}), closed);
      const now = t.clock.now();
      await assert.rejects(adapter.claim({ queues: ["default"], limit: 1, now, leaseToken: "x", leaseExpiresAt: now + 1_000 }), closed);
      assert.equal((await t.docket().list({})).length, 1, "the store itself is untouched");
    },
  },
  {
    name: "enqueue › an adapter closed right after enqueues reports no error: what an enqueue left running (a notice) ends before its connections close",
    async run(t) {
      const adapter = await t.store.connect();
      const errors: string[] = [];
      adapter.onError?.((e) => errors.push(e.message));
      const d = new Docket({ adapter, clock: t.clock });
      await d.enqueue("t", 1);
      await d.enqueueMany([{ task: "t", payload: 2 }, { task: "t", payload: 3 }]);
      await adapter.close();
      await sleep(50);
      assert.deepEqual(errors, []);
      assert.equal(await count(t), 3);
    },
  },
  {
    name: "enqueueMany › stores every job in input order",
    async run(t) {
      const d = t.docket();
      const jobs = await d.enqueueMany(Array.from({ length: 25 }, (_, i) => ({ task: "t", payload: { i } })));
      assert.deepEqual(jobs.map((j) => (j.payload as { i: number }).i), Array.from({ length: 25 }, (_, i) => i));
      assert.equal(await count(t), 25);
    },
  },
  {
    name: "enqueueMany › concurrent batches on separate connections each get back exactly their own rows, in input order",
    async run(t) {
      const others = [t.adapter, await t.connect(), await t.connect()];
      const now = t.clock.now();
      const batches = await Promise.all(
        others.map((adapter, b) =>
          adapter.enqueue({ jobs: Array.from({ length: 700 }, (_, i) => newJob({ runAt: now, payload: JSON.stringify({ b, i }) })), now }),
        ),
      );
      const ids = new Set<number>();
      batches.forEach((records, b) => {
        assert.equal(records.length, 700);
        records.forEach((r, i) => {
          assert.deepEqual(JSON.parse(r.payload), { b, i }, `batch ${b} row ${i}`);
          ids.add(r.id);
        });
      });
      assert.equal(ids.size, 2100, "every row has its own id");
      for (const id of [...ids].slice(0, 50)) assert.ok(await t.adapter.get({ id }));
    },
  },
  {
    name: "enqueueMany › one invalid item rejects the whole batch and writes nothing",
    async run(t) {
      const d = t.docket();
      await rejectsAndWritesNothing(t, "INVALID_PAYLOAD", () =>
        d.enqueueMany([
          { task: "t", payload: 1 },
          { task: "t", payload: { bad: 1n } },
        ]),
      );
    },
  },
  {
    name: "enqueue (adapter) › a row the database refuses rolls back the whole batch",
    async run(t) {
      const now = t.clock.now();
      await assert.rejects(() =>
        t.adapter.enqueue({ jobs: [newJob({ runAt: now }), newJob({ runAt: now, payload: "{not json" })], now }),
      );
      assert.equal(await count(t), 0);
    },
  },
  {
    name: "enqueue › an empty task name is an UnknownTaskError and writes nothing",
    async run(t) {
      await rejectsAndWritesNothing(t, "UNKNOWN_TASK", () => t.docket().enqueue("", {}));
    },
  },
  {
    name: "enqueue › a task that is not registered is an UnknownTaskError and writes nothing",
    async run(t) {
      const d = t.docket<{ known: null }>({ tasks: { known: {} } });
      await rejectsAndWritesNothing(t, "UNKNOWN_TASK", () => d.enqueue("unknown" as "known", null));
      assert.equal((await d.enqueue("known", null)).state, "ready");
    },
  },
  {
    name: "enqueue › a payload over maxPayloadBytes is PayloadTooLargeError and writes nothing",
    async run(t) {
      const d = t.docket({ maxPayloadBytes: 100 });
      await rejectsAndWritesNothing(t, "PAYLOAD_TOO_LARGE", () => d.enqueue("t", "x".repeat(100)));
      await d.enqueue("t", "x".repeat(90));
    },
  },
  {
    name: "enqueue › payloadLimit() is maxPayloadBytes unless the database stores less, and a payload of exactly that size is stored whole",
    async run(t) {
      const d = t.docket({ maxPayloadBytes: 64 * 1024 });
      const limit = await d.payloadLimit();
      assert.ok(Number.isSafeInteger(limit) && limit > 0 && limit <= 64 * 1024, `payloadLimit() is ${limit}`);
      // JSON quotes included: `limit` bytes, then one more.
      const job = await d.enqueue("t", "x".repeat(limit - 2));
      assert.equal((await d.get(job.id))?.payload, job.payload);
      await rejectsAndWritesNothing(t, "PAYLOAD_TOO_LARGE", () => d.enqueue("t", "x".repeat(limit - 1)));
    },
  },
  ...BAD_PAYLOADS.map(([what, payload]) => ({
    name: `enqueue › a payload holding ${what} is InvalidPayloadError and writes nothing`,
    async run(t: CaseContext) {
      await rejectsAndWritesNothing(t, "INVALID_PAYLOAD", () => t.docket().enqueue("t", payload));
    },
  })),
  ...BAD_OPTIONS.map(([what, options]) => ({
    name: `enqueue › ${what} is InvalidArgumentError and writes nothing`,
    async run(t: CaseContext) {
      await rejectsAndWritesNothing(t, "INVALID_ARGUMENT", () => t.docket().enqueue("t", {}, options));
    },
  })),
];
