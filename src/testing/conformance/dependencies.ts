import assert from "node:assert/strict";
import { InvalidArgumentError, NotFoundError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { claim, insert, newJob, stateOf } from "./helpers.ts";
import { settleOne } from "../lease-writes.ts";

const after = (...ids: number[]) => ({ after: { ids, refs: [] } });

/** Claims `job` from its queue (it must be claimable) and completes it. */
async function run(t: CaseContext, job: JobRecord, result = "null"): Promise<void> {
  const [claimed] = (await claim(t, 100, t.adapter, [job.queue])).filter((c) => c.id === job.id);
  assert.ok(claimed, `job ${job.id} should be claimable`);
  assert.ok(await settleOne(t.adapter, { kind: "complete", id: job.id, leaseToken: claimed.leaseToken!, now: t.clock.now(), result }));
}

/** Claims `job` and fails its last attempt: it ends dead. */
async function bury(t: CaseContext, job: JobRecord): Promise<void> {
  const [claimed] = (await claim(t, 100, t.adapter, [job.queue])).filter((c) => c.id === job.id);
  assert.ok(claimed, `job ${job.id} should be claimable`);
  assert.ok(await settleOne(t.adapter, { kind: "fail", id: job.id, leaseToken: claimed.leaseToken!, now: t.clock.now(), error: "boom", retryAt: null }));
}

async function count(t: CaseContext): Promise<number> {
  return (await t.adapter.list({ limit: 10_000 })).length;
}

/** Dependencies (EnqueueOptions.after, I15): children wait, are released exactly once, and are cancelled with a failed parent. */
export const dependencyCases: ConformanceCase[] = [
  {
    name: "dependencies › a child waits (never claimed) until every parent succeeded, then is scheduled due and claimed; dependencies() lists both sides",
    async run(t) {
      const a = await insert(t, { queue: "pa" });
      const b = await insert(t, { queue: "pb" });
      const child = await insert(t, after(a.id, b.id));
      assert.equal(child.state, "waiting");
      assert.deepEqual(await claim(t, 10), [], "a waiting job is not claimed");
      assert.deepEqual(await t.adapter.dependencies({ id: child.id }), { parents: [a.id, b.id], children: [] });
      assert.deepEqual(await t.adapter.dependencies({ id: a.id }), { parents: [], children: [child.id] });
      await run(t, a);
      assert.equal(await stateOf(t, child.id), "waiting", "one parent of two succeeded: still waiting");
      assert.deepEqual(await claim(t, 10), []);
      await run(t, b);
      assert.equal(await stateOf(t, child.id), "scheduled", "released when the last parent succeeded");
      const [claimed] = await claim(t, 10);
      assert.equal(claimed?.id, child.id);
    },
  },
  {
    name: "dependencies › two parents completed in one settle batch release their child once",
    async run(t) {
      const a = await insert(t, { queue: "p" });
      const b = await insert(t, { queue: "p" });
      const child = await insert(t, after(a.id, b.id));
      const claimed = await claim(t, 10, t.adapter, ["p"]);
      assert.equal(claimed.length, 2);
      const now = t.clock.now();
      const settled = await t.adapter.settle({ items: claimed.map((c) => ({ kind: "complete" as const, id: c.id, leaseToken: c.leaseToken!, now, concurrencyKey: null })) });
      assert.ok(settled.every((s) => s?.state === "succeeded"));
      assert.equal(await stateOf(t, child.id), "scheduled");
      assert.equal((await claim(t, 10)).length, 1);
    },
  },
  {
    name: "dependencies › a parent that already succeeded counts as done: the child is stored as without parents",
    async run(t) {
      const a = await insert(t, { queue: "p" });
      await run(t, a);
      const child = await insert(t, after(a.id));
      assert.equal(child.state, "ready");
      const delayed = await insert(t, { ...after(a.id), state: "scheduled", runAt: t.clock.now() + 60_000 });
      assert.equal(delayed.state, "scheduled");
    },
  },
  {
    name: "dependencies › a parent that ends dead cancels its waiting descendants (grandchildren too), the reason naming it; a cancelled parent likewise",
    async run(t) {
      const a = await insert(t, { queue: "p", maxAttempts: 1 });
      const other = await insert(t, { queue: "q" });
      const child = await insert(t, after(a.id, other.id));
      const grandchild = await insert(t, after(child.id));
      await bury(t, a);
      for (const id of [child.id, grandchild.id]) {
        const job = await t.adapter.get({ id });
        assert.equal(job?.state, "cancelled");
        assert.match(job!.lastError ?? "", new RegExp(`parent job ${a.id} ended dead`));
        assert.ok(job!.finishedAt !== null);
      }
      assert.equal(await stateOf(t, other.id), "ready", "the other parent is untouched");
      const c = await insert(t, { queue: "p" });
      const waiting = await insert(t, after(c.id));
      await t.adapter.cancel({ id: c.id, now: t.clock.now() });
      const cancelled = await t.adapter.get({ id: waiting.id });
      assert.equal(cancelled?.state, "cancelled");
      assert.match(cancelled!.lastError ?? "", new RegExp(`parent job ${c.id} ended cancelled`));
    },
  },
  {
    name: "dependencies › cancelling a waiting child cancels its own waiting children; its parent, when it succeeds, releases nothing",
    async run(t) {
      const a = await insert(t, { queue: "p" });
      const child = await insert(t, after(a.id));
      const grandchild = await insert(t, after(child.id));
      assert.ok(await t.adapter.cancel({ id: child.id, now: t.clock.now() }));
      assert.equal(await stateOf(t, grandchild.id), "cancelled");
      await run(t, a);
      assert.equal(await stateOf(t, child.id), "cancelled");
      assert.deepEqual(await claim(t, 10), []);
    },
  },
  {
    name: "dependencies › a parent that does not exist is NotFoundError, one dead or cancelled InvalidArgumentError; nothing is stored",
    async run(t) {
      const dead = await insert(t, { queue: "p", maxAttempts: 1 });
      await bury(t, dead);
      const cancelled = await insert(t, { queue: "p" });
      await t.adapter.cancel({ id: cancelled.id, now: t.clock.now() });
      const live = await insert(t, { queue: "p" });
      const before = await count(t);
      const now = t.clock.now();
      const job = (parents: number[]) => ({ task: "t", queue: "default", payload: "{}", state: "ready" as const, priority: 0, runAt: now, maxAttempts: 3, backoff: null, after: { ids: parents, refs: [] } });
      await assert.rejects(t.adapter.enqueue({ jobs: [job([live.id]), job([live.id, 999_999])], now }), NotFoundError);
      await assert.rejects(t.adapter.enqueue({ jobs: [job([dead.id])], now }), (e: unknown) => e instanceof InvalidArgumentError && /is dead/.test(e.message));
      await assert.rejects(t.adapter.enqueue({ jobs: [job([cancelled.id])], now }), (e: unknown) => e instanceof InvalidArgumentError && /is cancelled/.test(e.message));
      assert.equal(await count(t), before, "nothing stored");
      assert.deepEqual(await t.adapter.dependencies({ id: live.id }), { parents: [], children: [] });
    },
  },
  {
    // On SQLite the concurrent calls share one transaction (group commit, each in a savepoint): a refused call must fail alone.
    name: "enqueue › concurrent calls, some refused (a parent that does not exist): each refused call fails alone and stores nothing, every other call's jobs are stored",
    async run(t) {
      const live = await insert(t, { queue: "p" });
      const before = await count(t);
      const now = t.clock.now();
      const job = (call: number, parents: number[]) => ({ task: "t", queue: "default", payload: JSON.stringify({ call }), state: "ready" as const, priority: 0, runAt: now, maxAttempts: 3, backoff: null, after: { ids: parents, refs: [] } });
      const refused = (call: number) => call % 3 === 1;
      const calls = Array.from({ length: 12 }, (_, call) => t.adapter.enqueue({ jobs: refused(call) ? [job(call, [live.id]), job(call, [live.id, 999_999])] : [job(call, [live.id])], now }));
      const settled = await Promise.allSettled(calls);
      settled.forEach((s, call) => {
        if (refused(call)) assert.ok(s.status === "rejected" && s.reason instanceof NotFoundError, `call ${call}: NotFoundError, got ${s.status === "rejected" ? String(s.reason) : "stored"}`);
        else assert.ok(s.status === "fulfilled" && s.value.length === 1, `call ${call} stored its job, got ${s.status === "rejected" ? String(s.reason) : s.value.length}`);
      });
      const stored = (await t.adapter.list({ limit: 10_000 })).filter((r) => r.id !== live.id && r.task === "t" && r.queue === "default");
      assert.deepEqual(stored.map((r) => (JSON.parse(r.payload) as { call: number }).call).sort((a, b) => a - b), [0, 2, 3, 5, 6, 8, 9, 11]);
      assert.equal(await count(t), before + 8);
      assert.deepEqual(
        (await t.adapter.dependencies({ id: live.id })).children.slice().sort((a, b) => a - b),
        stored.map((r) => r.id).sort((a, b) => a - b),
      );
    },
  },
  {
    name: "list › ids: only those jobs, in id order, missing ones left out, with the other filters (how dependencies() and ctx.parents() read many jobs at once)",
    async run(t) {
      const now = t.clock.now();
      const [a, b, c] = await t.adapter.enqueue({ jobs: [newJob({ runAt: now }), newJob({ runAt: now, queue: "other" }), newJob({ runAt: now })], now });
      const ids = (rs: { id: number }[]) => rs.map((r) => r.id);
      assert.deepEqual(ids(await t.adapter.list({ ids: [c!.id, 999_999, a!.id, c!.id], limit: 10 })), [a!.id, c!.id]);
      assert.deepEqual(ids(await t.adapter.list({ ids: [a!.id, b!.id, c!.id], queue: "other", limit: 10 })), [b!.id]);
      assert.deepEqual(ids(await t.adapter.list({ ids: [a!.id, b!.id, c!.id], limit: 2 })), [a!.id, b!.id]);
      assert.deepEqual(await t.adapter.list({ ids: [], limit: 10 }), []);
    },
  },
  {
    name: "dependencies › enqueueMany stores a graph by refs in one call (a diamond): each child runs after its parents, the join once",
    async run(t) {
      const d = t.docket();
      const [a, b, c, join] = await d.enqueueMany([
        { task: "t", payload: { n: "a" }, ref: "a", options: { queue: "g" } },
        { task: "t", payload: { n: "b" }, ref: "b", options: { queue: "g", after: [{ ref: "a" }] } },
        { task: "t", payload: { n: "c" }, ref: "c", options: { queue: "g", after: [{ ref: "a" }] } },
        { task: "t", payload: { n: "join" }, options: { queue: "g", after: [{ ref: "b" }, { ref: "c" }] } },
      ]);
      assert.deepEqual([a!.state, b!.state, c!.state, join!.state], ["ready", "waiting", "waiting", "waiting"]);
      const deps = await d.dependencies(join!.id);
      assert.deepEqual(deps.parents.map((j) => j.id), [b!.id, c!.id]);
      assert.deepEqual((await d.dependencies(a!.id)).children.map((j) => j.id), [b!.id, c!.id]);
      const order: number[] = [];
      for (let round = 0; round < 4; round++) {
        const claimed = await claim(t, 10, t.adapter, ["g"]);
        for (const job of claimed) {
          order.push(job.id);
          await settleOne(t.adapter, { kind: "complete", id: job.id, leaseToken: job.leaseToken!, now: t.clock.now() });
        }
      }
      assert.deepEqual(order, [a!.id, b!.id, c!.id, join!.id]);
      assert.equal((await d.get(join!.id))?.state, "succeeded");
    },
  },
  {
    name: "dependencies › bad after, ref or cycle is InvalidArgumentError naming the item, and stores nothing",
    async run(t) {
      const d = t.docket();
      const parent = await d.enqueue("t", {});
      const before = await count(t);
      const bad: [() => Promise<unknown>, RegExp][] = [
        [() => d.enqueue("t", {}, { after: [] }), /after must name 1 to 1000 parents, got 0/],
        [() => d.enqueue("t", {}, { after: "1" as never }), /after must be an array/],
        [() => d.enqueue("t", {}, { after: [0] }), /after\[0\] must be a job id/],
        [() => d.enqueue("t", {}, { after: [1.5] }), /after\[0\] must be a job id/],
        [() => d.enqueue("t", {}, { after: [parent.id, parent.id] }), /after\[1\] names job \d+ twice/],
        [() => d.enqueue("t", {}, { after: [{ ref: "x" }] }), /enqueue takes job ids only/],
        [() => d.enqueue("t", {}, { after: [parent.id], debounce: { key: "k", delayMs: 10 } }), /debounce cannot be combined with after/],
        [() => d.enqueueMany([{ task: "t", payload: {}, options: { after: [{ ref: "nobody" }] } }]), /items\[0\]\.options\.after names ref "nobody", which no item of this call has/],
        [() => d.enqueueMany([{ task: "t", payload: {}, ref: "x" }, { task: "t", payload: {}, ref: "x" }]), /items\[1\]\.ref "x" is already the ref of items\[0\]/],
        [() => d.enqueueMany([{ task: "t", payload: {}, ref: "" }]), /items\[0\]\.ref must be a non-empty string/],
        [() => d.enqueueMany([{ task: "t", payload: {}, options: { after: [{ ref: 7 as never }] } }]), /after\[0\]\.ref must be a non-empty string/],
        [() => d.enqueueMany([{ task: "t", payload: {}, options: { after: [{ ref: "x", id: 1 } as never] } }]), /must be a job id or \{ ref: name \}/],
        [
          () =>
            d.enqueueMany([
              { task: "t", payload: {}, ref: "a", options: { after: [{ ref: "c" }] } },
              { task: "t", payload: {}, ref: "b", options: { after: [{ ref: "a" }] } },
              { task: "t", payload: {}, ref: "c", options: { after: [{ ref: "b" }] } },
            ]),
          /the refs form a cycle \(items\[0\] → items\[2\] → items\[1\] → items\[0\]\)/,
        ],
        [() => d.enqueueMany([{ task: "t", payload: {}, ref: "self", options: { after: [{ ref: "self" }] } }]), /cycle/],
        // Items with one idempotency key are one job: a cycle through them (or a job its own parent) could never run either.
        [
          () =>
            d.enqueueMany([
              { task: "t", payload: {}, ref: "a", options: { idempotencyKey: "dep-cycle-1", after: [{ ref: "c" }] } },
              { task: "t", payload: {}, ref: "c", options: { idempotencyKey: "dep-cycle-1" } },
            ]),
          /the refs form a cycle \(items with one idempotencyKey are one job\) \(items\[0\] → items\[0\]\)/,
        ],
        [
          () =>
            d.enqueueMany([
              { task: "t", payload: {}, ref: "a", options: { idempotencyKey: "dep-cycle-2", after: [{ ref: "b" }] } },
              { task: "t", payload: {}, ref: "b", options: { after: [{ ref: "c" }] } },
              { task: "t", payload: {}, ref: "c", options: { idempotencyKey: "dep-cycle-2" } },
            ]),
          /the refs form a cycle \(items with one idempotencyKey are one job\)/,
        ],
      ];
      for (const [call, message] of bad) {
        await assert.rejects(call(), (e: unknown) => e instanceof InvalidArgumentError && message.test(e.message), String(message));
      }
      await assert.rejects(d.enqueueMany([{ task: "t", payload: {}, options: { after: [parent.id + 1000] } }]), NotFoundError);
      assert.equal(await count(t), before, "nothing stored");
    },
  },
  {
    name: "dependencies › with other options: a released keyed child is admitted through its key (blocked while it is full), a delayed child waits for its run time, an idempotent child is stored once",
    async run(t) {
      const key = { key: "k", limit: 1, onConflict: "block" as const };
      const holder = await insert(t, { concurrency: key });
      const a = await insert(t, { queue: "p" });
      const keyed = await insert(t, { ...after(a.id), concurrency: key });
      assert.equal(keyed.state, "waiting");
      const delayed = await insert(t, { ...after(a.id), state: "scheduled", runAt: t.clock.now() + 5_000 });
      const [i1] = await t.adapter.enqueue({ jobs: [{ task: "t", queue: "default", payload: "{}", state: "ready", priority: 0, runAt: t.clock.now(), maxAttempts: 3, backoff: null, idempotencyKey: "once", after: { ids: [a.id], refs: [] } }], now: t.clock.now() });
      const [i2] = await t.adapter.enqueue({ jobs: [{ task: "t", queue: "default", payload: "{}", state: "ready", priority: 0, runAt: t.clock.now(), maxAttempts: 3, backoff: null, idempotencyKey: "once", after: { ids: [a.id], refs: [] } }], now: t.clock.now() });
      assert.equal(i2!.id, i1!.id);
      assert.equal(i2!.created, false);
      assert.deepEqual((await t.adapter.dependencies({ id: a.id })).children, [keyed.id, delayed.id, i1!.id]);
      await run(t, a);
      const claimed = await claim(t, 10);
      assert.deepEqual(claimed.map((c) => c.id).sort((x, y) => x - y), [holder.id, i1!.id], "the keyed child waits for its key; the delayed one for its time");
      assert.equal(await stateOf(t, keyed.id), "blocked");
      assert.equal(await stateOf(t, delayed.id), "scheduled");
      await settleOne(t.adapter, { kind: "complete", id: holder.id, leaseToken: claimed.find((c) => c.id === holder.id)!.leaseToken!, now: t.clock.now() });
      assert.equal(await stateOf(t, keyed.id), "ready", "the key's freed slot went to the released child");
      t.clock.advance(5_000);
      assert.ok((await claim(t, 10)).some((c) => c.id === delayed.id));
    },
  },
  {
    name: "dependencies › enqueue returns each child as stored when its ref parent turned out ended: a finished job its idempotency key stands for (succeeded: the child is released; dead: cancelled) or a parent its key discarded (cancelled)",
    async run(t) {
      const done = await insert(t, { queue: "p", idempotencyKey: "ended-done" });
      await run(t, done);
      const dead = await insert(t, { queue: "p", idempotencyKey: "ended-dead", maxAttempts: 1 });
      await bury(t, dead);
      await insert(t, { queue: "h", concurrency: { key: "ended-full", limit: 1, onConflict: "block" } });
      const now = t.clock.now();
      const refs = (r: number) => ({ after: { ids: [], refs: [r] } });
      const records = await t.adapter.enqueue({
        jobs: [
          newJob({ runAt: now, queue: "p", idempotencyKey: "ended-done" }),
          newJob({ runAt: now, ...refs(0) }),
          newJob({ runAt: now, queue: "p", idempotencyKey: "ended-dead" }),
          newJob({ runAt: now, ...refs(2) }),
          newJob({ runAt: now, queue: "h", concurrency: { key: "ended-full", limit: 1, onConflict: "discard" } }),
          newJob({ runAt: now, ...refs(4) }),
        ],
        now,
      });
      assert.deepEqual(
        records.map((r) => [r.state, r.created]),
        [["succeeded", false], ["scheduled", true], ["dead", false], ["cancelled", true], ["cancelled", true], ["cancelled", true]],
      );
      for (const r of records) {
        const stored = (await t.adapter.get({ id: r.id }))!;
        assert.deepEqual([r.state, r.runAt, r.lastError, r.updatedAt], [stored.state, stored.runAt, stored.lastError, stored.updatedAt], `job ${r.id} as returned is the job as stored`);
      }
    },
  },
  {
    name: "dependencies › a purged job's edges go with it",
    async run(t) {
      const a = await insert(t, { queue: "p" });
      const child = await insert(t, after(a.id));
      await run(t, a);
      const purged = await t.adapter.purge({ states: ["succeeded"], finishedBefore: t.clock.now(), limit: 10 });
      assert.equal(purged, 1);
      assert.deepEqual(await t.adapter.dependencies({ id: child.id }), { parents: [], children: [] });
      assert.equal(await stateOf(t, child.id), "scheduled");
    },
  },
  {
    name: "dependencies › a worker runs a graph: each job starts only after all its parents succeeded, at once (no poll wait), and reads their results through ctx.parents()",
    slow: true,
    async run(t) {
      const d = t.docket();
      const started: string[] = [];
      const seen: Record<string, unknown> = {};
      const w = d.worker({
        pollMs: 60_000,
        logger: null,
        handlers: {
          step: async (p: unknown, ctx) => {
            const { n } = p as { n: string };
            started.push(n);
            seen[n] = (await ctx.parents()).map((j) => j.result);
            return `${n}!`;
          },
        },
      });
      await w.start();
      try {
        const [, , , join] = await d.enqueueMany([
          { task: "step", payload: { n: "a" }, ref: "a" },
          { task: "step", payload: { n: "b" }, ref: "b", options: { after: [{ ref: "a" }] } },
          { task: "step", payload: { n: "c" }, ref: "c", options: { after: [{ ref: "a" }] } },
          { task: "step", payload: { n: "join" }, options: { after: [{ ref: "b" }, { ref: "c" }] } },
        ]);
        const done = await d.waitFor(join!.id, { timeoutMs: 10_000, pollMs: 10 });
        assert.equal(done.state, "succeeded");
      } finally {
        await w.stop();
      }
      assert.equal(started[0], "a");
      assert.deepEqual(started.slice(1, 3).sort(), ["b", "c"]);
      assert.equal(started[3], "join");
      assert.deepEqual(seen, { a: [], b: ["a!"], c: ["a!"], join: ["b!", "c!"] });
    },
  },
];
