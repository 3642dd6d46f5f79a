import assert from "node:assert/strict";
import type { DocketAdapter, NewJob } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { DocketError } from "../../core/errors.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { LEASE_MS, insert, newJob, token } from "./helpers.ts";

/** Claims up to `limit` of queue q at the clock's now. */
function claimQ(t: CaseContext, limit: number, adapter: DocketAdapter = t.adapter): Promise<JobRecord[]> {
  const now = t.clock.now();
  return adapter.claim({ queues: ["q"], limit, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
}

const fair = (key: string, weight = 1, more: Partial<NewJob> = {}): Partial<NewJob> => ({ queue: "q", fairness: { key, weight }, ...more });
/** The fairness keys of claimed jobs, in claim order; "-" for the implicit key. */
const keysOf = (jobs: readonly JobRecord[]) => jobs.map((j) => j.fairKey ?? "-");
const isInvalid = (e: unknown) => e instanceof DocketError && e.code === "INVALID_ARGUMENT";

/** Claims one job at a time, `n` times; the keys served, in turn. */
async function oneByOne(t: CaseContext, n: number): Promise<string[]> {
  const served: string[] = [];
  for (let i = 0; i < n; i++) served.push(...keysOf(await claimQ(t, 1)));
  return served;
}

export const fairnessCases: ConformanceCase[] = [
  {
    name: "fairness › claims serve the keys in round-robin, whatever order their jobs came in (I13)",
    async run(t) {
      for (const key of ["a", "a", "a", "b", "b", "b", "c", "c", "c"]) await insert(t, fair(key));
      assert.deepEqual(await oneByOne(t, 9), ["a", "b", "c", "a", "b", "c", "a", "b", "c"]);
    },
  },
  {
    name: "fairness › one claim goes round the keys as often as it has room (work-conserving)",
    async run(t) {
      for (let i = 0; i < 4; i++) await insert(t, fair("a"));
      await insert(t, fair("b"));
      for (let i = 0; i < 4; i++) await insert(t, fair("c"));
      const got = await claimQ(t, 7);
      assert.equal(got.length, 7, "no room left idle while jobs are ready");
      const count = (k: string) => keysOf(got).filter((x) => x === k).length;
      assert.deepEqual([count("a"), count("b"), count("c")], [3, 1, 3]);
      assert.deepEqual(keysOf(await claimQ(t, 5)).sort(), ["a", "c"], "the rest");
    },
  },
  {
    name: "fairness › a batch of several keys' jobs takes its places in one go, after the places given before it",
    async run(t) {
      await insert(t, fair("a"));
      const now = t.clock.now();
      await t.adapter.enqueue({ jobs: ["a", "a", "b", "b", "c"].map((key) => newJob({ ...fair(key), runAt: now })), now });
      assert.deepEqual(await oneByOne(t, 6), ["a", "b", "c", "a", "b", "a"]);
    },
  },
  {
    name: "fairness › a key of weight 2 gets two jobs per round",
    async run(t) {
      for (let i = 0; i < 4; i++) await insert(t, fair("heavy", 2));
      for (let i = 0; i < 4; i++) await insert(t, fair("light", 1));
      assert.deepEqual(await oneByOne(t, 6), ["heavy", "heavy", "light", "heavy", "heavy", "light"]);
    },
  },
  {
    name: "fairness › a key's stored weight is the last enqueue's",
    async run(t) {
      await insert(t, fair("a", 3));
      for (let i = 0; i < 3; i++) await insert(t, fair("a", 1));
      for (let i = 0; i < 3; i++) await insert(t, fair("b", 1));
      assert.deepEqual(await oneByOne(t, 4), ["a", "b", "a", "b"]);
    },
  },
  {
    name: "fairness › priorities (and run_at, id) order the jobs within a key, not the keys",
    async run(t) {
      const low = await insert(t, fair("a", 1, { priority: 5 }));
      const high = await insert(t, fair("a", 1, { priority: -5 }));
      const b = await insert(t, fair("b", 1, { priority: 9 }));
      const got = [];
      for (let i = 0; i < 3; i++) got.push(...(await claimQ(t, 1)).map((j) => j.id));
      assert.deepEqual(got, [high.id, b.id, low.id]);
    },
  },
  {
    name: "fairness › a fair queue's jobs without a fairness key share one implicit key of weight 1; those enqueued before it was fair come after its tagged jobs",
    async run(t) {
      const early = await insert(t, { queue: "q" });
      for (let i = 0; i < 3; i++) await insert(t, fair("a"));
      for (let i = 0; i < 2; i++) await insert(t, { queue: "q" });
      const got = [];
      for (let i = 0; i < 6; i++) got.push(...(await claimQ(t, 1)));
      assert.deepEqual(keysOf(got), ["a", "-", "a", "-", "a", "-"]);
      assert.equal(got[5]!.id, early.id, "the job enqueued before the queue was fair comes last");
    },
  },
  {
    name: "fairness › a backlog enqueued before its queue was fair drains claim after claim once the tagged jobs are gone, not one claim a second",
    async run(t) {
      for (let i = 0; i < 30; i++) await insert(t, { queue: "q" });
      await insert(t, fair("a"));
      // Every claim at one instant: the backlog must not wait for the clock between claims.
      let claimed = 0;
      for (let i = 0; i < 6 && claimed < 31; i++) claimed += (await claimQ(t, 10)).length;
      assert.equal(claimed, 31, "all 31 jobs claimed within 6 claims of 10 at one instant");
    },
  },
  {
    name: "fairness › a keyed job stored before its queue was fair is claimed as its key admits it, though a claim just before found none",
    async run(t) {
      for (let i = 0; i < 3; i++) await insert(t, { queue: "q", concurrency: { key: "k", limit: 1, onConflict: "block" } });
      await insert(t, fair("a"));
      const first = await claimQ(t, 10);
      const keyed = [...first, ...(await claimQ(t, 10))].filter((j) => j.concurrencyKey === "k");
      assert.equal(keyed.length, 1, "the key's one slot");
      // Nothing ready now: the key holds the other two back.
      assert.deepEqual(await claimQ(t, 10), []);
      t.clock.advance(10);
      await t.adapter.settle({ items: [{ kind: "complete", id: keyed[0]!.id, leaseToken: keyed[0]!.leaseToken!, now: t.clock.now(), concurrencyKey: "k" }] });
      t.clock.advance(10);
      const next = await claimQ(t, 10);
      assert.deepEqual(keysOf(next), ["-"], `the job its key admitted, 20 ms after a claim that found none (first ${JSON.stringify(first.map((j) => [j.id, j.concurrencyKey, j.fairKey]))}, next ${JSON.stringify(next.map((j) => [j.id, j.concurrencyKey, j.state]))})`);
    },
  },
  {
    name: "fairness › a key with one ready job starts within ⌈active keys ÷ jobs per claim⌉ claims, behind a flooding key",
    async run(t) {
      const now = t.clock.now();
      await t.adapter.enqueue({ jobs: Array.from({ length: 300 }, () => newJob({ ...fair("flood"), runAt: now })), now });
      const small = ["s1", "s2", "s3", "s4", "s5", "s6", "s7"];
      for (const key of small) await insert(t, fair(key));
      const perClaim = 3;
      const bound = Math.ceil((small.length + 1) / perClaim);
      const startedIn = new Map<string, number>();
      for (let round = 1; round <= bound; round++) {
        const got = await claimQ(t, perClaim);
        assert.equal(got.length, perClaim);
        for (const k of keysOf(got)) if (!startedIn.has(k)) startedIn.set(k, round);
      }
      for (const key of small) assert.ok(startedIn.has(key), `key ${key} did not start within ${bound} claims (started: ${JSON.stringify([...startedIn])})`);
      // Later arrivals are not starved either: a new key takes the place of the queue's first ready job, right after it.
      await insert(t, fair("late"));
      assert.ok([...keysOf(await claimQ(t, 1)), ...keysOf(await claimQ(t, 1))].includes("late"), "the new key is served within two claims of one");
    },
  },
  {
    name: "fairness › beside a queue cap: the cap holds and its room goes round the keys",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 3 });
      for (let i = 0; i < 5; i++) await insert(t, fair("a"));
      for (let i = 0; i < 5; i++) await insert(t, fair("b"));
      const got = await claimQ(t, 10);
      assert.equal(got.length, 3, "the cap");
      assert.deepEqual(keysOf(got).sort(), ["a", "a", "b"]);
    },
  },
  {
    name: "fairness › beside a rate key: a key over its limit yields its turns to the others",
    async run(t) {
      for (let i = 0; i < 3; i++) await insert(t, fair("a", 1, { rateLimit: { key: "r", limit: 1, periodMs: 60_000 } }));
      for (let i = 0; i < 3; i++) await insert(t, fair("b"));
      const got = await claimQ(t, 4);
      assert.deepEqual(keysOf(got).sort(), ["a", "b", "b", "b"]);
    },
  },
  {
    name: "fairness › beside a concurrency key and a task cap: a job must satisfy all its controls",
    async run(t) {
      await t.adapter.setTaskControl({ task: "capped", maxRunning: 1 });
      for (let i = 0; i < 3; i++) await insert(t, fair("a", 1, { concurrency: { key: "c", limit: 1, onConflict: "block" } }));
      for (let i = 0; i < 3; i++) await insert(t, fair("b", 1, { task: "capped" }));
      for (let i = 0; i < 2; i++) await insert(t, fair("c"));
      const got = await claimQ(t, 10);
      const count = (k: string) => keysOf(got).filter((x) => x === k).length;
      assert.deepEqual([count("a"), count("b"), count("c")], [1, 1, 2]);
    },
  },
  {
    name: "fairness › concurrent claimers on separate connections serve different keys (R21)",
    slow: true,
    async run(t) {
      const conns = [t.adapter, await t.connect(), await t.connect()];
      const now = t.clock.now();
      await t.adapter.enqueue({ jobs: Array.from({ length: 50 }, () => newJob({ ...fair("flood"), runAt: now })), now });
      for (const key of ["x", "y"]) await insert(t, fair(key));
      const got = (await Promise.all(conns.map((c) => claimQ(t, 1, c)))).flat();
      assert.deepEqual(keysOf(got).sort(), ["flood", "x", "y"], "three claims of one job each: one per key");
    },
  },
  {
    name: "fairness › a key whose jobs all ran is served again when new jobs come",
    async run(t) {
      await insert(t, fair("a"));
      await insert(t, fair("b"));
      assert.equal((await claimQ(t, 5)).length, 2);
      assert.deepEqual(await claimQ(t, 5), []);
      await insert(t, fair("a"));
      await insert(t, fair("b"));
      assert.deepEqual(keysOf(await claimQ(t, 5)).sort(), ["a", "b"]);
    },
  },
  {
    name: "fairness › delayed jobs take their places when they fall due, not when enqueued: a key's burst of scheduled jobs goes round with the others",
    async run(t) {
      const due = t.clock.now() + 10_000;
      for (let i = 0; i < 4; i++) await insert(t, fair("late", 1, { state: "scheduled", runAt: due }));
      for (const key of ["a", "b", "a", "b", "a", "b", "a", "b"]) await insert(t, fair(key));
      assert.deepEqual(await oneByOne(t, 2), ["a", "b"]);
      t.clock.advance(10_000);
      const served = await oneByOne(t, 9);
      for (let round = 0; round < 3; round++) {
        assert.deepEqual(served.slice(round * 3, round * 3 + 3).sort(), ["a", "b", "late"], `round ${round + 1} of ${JSON.stringify(served)} serves every key once`);
      }
    },
  },
  ...(
    [
      ["a weight of 0", { key: "k", weight: 0 }],
      ["a weight above 1000", { key: "k", weight: 1001 }],
      ["a fractional weight", { key: "k", weight: 1.5 }],
      ["an empty key", { key: "" }],
      ["no key", { weight: 2 }],
      ["a key ending in a space", { key: "k " }],
      ["an unknown field", { key: "k", share: 2 }],
      ["a string", "tenant:7"],
      ["null", null],
    ] as [string, unknown][]
  ).map(([what, fairness]) => ({
    name: `fairness › ${what} is InvalidArgumentError and writes nothing`,
    async run(t: CaseContext) {
      const d = t.docket();
      await assert.rejects(() => d.enqueue("t", {}, { queue: "q", fairness } as never), isInvalid);
      await assert.rejects(() => d.enqueueMany([{ task: "t", payload: {}, options: { queue: "q", fairness: { key: "ok" } } }, { task: "t", payload: {}, options: { queue: "q", fairness } as never }]), isInvalid);
      assert.deepEqual(await t.adapter.listControls(), { queues: [], tasks: [] });
      assert.deepEqual(await t.adapter.list({ limit: 10 }), []);
    },
  })),
];
