/**
 * DocketAdapter.settleAndHandOff: completions of jobs of a capped queue
 * hand their slots to the queue's next ready jobs in the same write. An
 * adapter may hand off nothing (or not have the method): every case holds
 * whether it does or not, and where it does, checks that it took exactly
 * the jobs the contract names.
 */
import assert from "node:assert/strict";
import type { DocketAdapter, SettleAndHandOffParams, SettledJob } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { LEASE_MS, claim, insert, token } from "./helpers.ts";

/** `settleAndHandOff` where the adapter has it, else `settle` (an adapter without it hands off nothing). */
export async function handOff(adapter: DocketAdapter, params: SettleAndHandOffParams): Promise<{ settled: (SettledJob | null)[]; claimed: JobRecord[] }> {
  if (adapter.settleAndHandOff) return adapter.settleAndHandOff(params);
  return { settled: await adapter.settle({ items: params.items }), claimed: [] };
}

/** Completes `jobs` (as claimed) in one batch, handing off up to `limit` jobs of `queues` (any task unless `tasks`). */
async function completeHandingOff(t: CaseContext, jobs: readonly JobRecord[], queues: string[], limit = 10, tasks?: string[]) {
  const now = t.clock.now();
  const items = jobs.map((j) => ({ kind: "complete" as const, id: j.id, leaseToken: j.leaseToken!, now, concurrencyKey: j.concurrencyKey }));
  const lease = token();
  const result = await handOff(t.adapter, { items, handOff: { queues, limit, now, leaseToken: lease, leaseExpiresAt: now + LEASE_MS, worker: "w2", ...(tasks ? { tasks } : {}) } });
  for (const job of result.claimed) {
    assert.equal(job.state, "running");
    assert.equal(job.leaseToken, lease);
    assert.equal(job.worker, "w2");
  }
  return result;
}

async function running(t: CaseContext, queue: string): Promise<JobRecord[]> {
  return t.adapter.list({ queue, state: "running", limit: 100 });
}

/** A hand-off took nothing, or exactly `expected` (by id, in claim order). */
function noneOr(claimed: readonly JobRecord[], expected: readonly JobRecord[]): void {
  if (claimed.length > 0) assert.deepEqual(claimed.map((j) => j.id), expected.map((j) => j.id));
}

export const handOffCases: ConformanceCase[] = [
  {
    name: "hand-off › a completion in a capped queue passes its slot to the queue's next ready job in claim order; the cap holds",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 2 });
      const a = await insert(t, { queue: "q" });
      const b = await insert(t, { queue: "q" });
      await insert(t, { queue: "q" });
      const urgent = await insert(t, { queue: "q", priority: -1 });
      const first = await claim(t, 10, t.adapter, ["q"]);
      assert.deepEqual(first.map((j) => j.id), [urgent.id, a.id]);
      const { settled, claimed } = await completeHandingOff(t, [first[0]!], ["q"]);
      assert.equal(settled[0]?.state, "succeeded");
      noneOr(claimed, [b]);
      assert.equal((await running(t, "q")).length, 1 + claimed.length);
      assert.ok((await claim(t, 10, t.adapter, ["q"])).length <= 1 - claimed.length);
    },
  },
  {
    name: "hand-off › per queue no more jobs than its completions freed, and no more than the limit in all",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 3 });
      for (let i = 0; i < 8; i++) await insert(t, { queue: "q" });
      const first = await claim(t, 10, t.adapter, ["q"]);
      assert.equal(first.length, 3);
      const two = await completeHandingOff(t, first.slice(0, 2), ["q"]);
      assert.ok(two.claimed.length <= 2, `${two.claimed.length} handed off for 2 completions`);
      const one = await completeHandingOff(t, [first[2]!, ...two.claimed], ["q"], 1);
      assert.ok(one.claimed.length <= 1, `${one.claimed.length} handed off with limit 1`);
      assert.ok((await running(t, "q")).length <= 3);
    },
  },
  {
    name: "hand-off › nothing from a paused queue, past a lowered cap, or from a queue without a cap",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "p", maxRunning: 2 });
      await t.adapter.setQueueControl({ queue: "low", maxRunning: 3 });
      for (const queue of ["p", "low", "free"]) for (let i = 0; i < 5; i++) await insert(t, { queue });
      const paused = await claim(t, 10, t.adapter, ["p"]);
      const low = await claim(t, 10, t.adapter, ["low"]);
      const free = await claim(t, 2, t.adapter, ["free"]);
      assert.equal(low.length, 3);
      await t.adapter.setQueueControl({ queue: "p", paused: true });
      assert.deepEqual((await completeHandingOff(t, [paused[0]!], ["p"])).claimed, []);
      // Cap 3 → 1 with 3 running: one completion leaves 2 running, still past the cap.
      await t.adapter.setQueueControl({ queue: "low", maxRunning: 1 });
      assert.deepEqual((await completeHandingOff(t, [low[0]!], ["low"])).claimed, []);
      // Cap 1 → 2 with 2 running: two completions leave none; two would fit, but only 2 − 0 = 2 ≤ freed.
      await t.adapter.setQueueControl({ queue: "low", maxRunning: 2 });
      const refill = await completeHandingOff(t, low.slice(1), ["low"]);
      assert.ok(refill.claimed.length <= 2);
      assert.ok((await running(t, "low")).length <= 2);
      assert.deepEqual((await completeHandingOff(t, [free[0]!], ["free"])).claimed, []);
    },
  },
  {
    name: "hand-off › a job of a capped task, or of a task the worker does not take, is passed over",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 1 });
      await t.adapter.setTaskControl({ task: "heavy", maxRunning: 5 });
      const first = await insert(t, { queue: "q", task: "x" });
      await insert(t, { queue: "q", task: "heavy" });
      await insert(t, { queue: "q", task: "other" });
      const taken = await insert(t, { queue: "q", task: "x" });
      const [job] = await claim(t, 1, t.adapter, ["q"]);
      assert.equal(job?.id, first.id);
      const { claimed } = await completeHandingOff(t, [job!], ["q"], 10, ["x"]);
      noneOr(claimed, [taken]);
    },
  },
  {
    name: "hand-off › a completion whose lease is not held writes nothing and hands off nothing",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 1 });
      await insert(t, { queue: "q" });
      await insert(t, { queue: "q" });
      const [job] = await claim(t, 1, t.adapter, ["q"]);
      const { settled, claimed } = await completeHandingOff(t, [{ ...job!, leaseToken: "not-the-lease" }], ["q"]);
      assert.deepEqual(settled, [null]);
      assert.deepEqual(claimed, []);
      assert.equal((await t.adapter.get({ id: job!.id }))?.state, "running");
      assert.equal((await running(t, "q")).length, 1);
    },
  },
  {
    name: "hand-off › a batch of completions and failures, with and without keys, records every outcome as settle would",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 4 });
      const keyed = await insert(t, { queue: "q", concurrency: { key: "k", limit: 1, onConflict: "block" } });
      for (let i = 0; i < 5; i++) await insert(t, { queue: "q" });
      const jobs = await claim(t, 10, t.adapter, ["q"]);
      assert.equal(jobs.length, 4);
      assert.ok(jobs.some((j) => j.id === keyed.id));
      const now = t.clock.now();
      const items = jobs.map((j, i) =>
        i === 1
          ? { kind: "fail" as const, id: j.id, leaseToken: j.leaseToken!, now, concurrencyKey: j.concurrencyKey, error: "boom", retryAt: null }
          : { kind: "complete" as const, id: j.id, leaseToken: j.leaseToken!, now, concurrencyKey: j.concurrencyKey },
      );
      const { settled, claimed } = await handOff(t.adapter, { items, handOff: { queues: ["q"], limit: 10, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS } });
      assert.deepEqual(settled.map((s) => s?.state), jobs.map((_, i) => (i === 1 ? "dead" : "succeeded")));
      assert.ok(claimed.length <= 3);
      assert.ok((await running(t, "q")).length <= 4);
    },
  },
];
