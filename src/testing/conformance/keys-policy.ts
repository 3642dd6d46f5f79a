import assert from "node:assert/strict";
import { discardReason } from "../../core/concurrency.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { claim, insert } from "./helpers.ts";
import { settleOne } from "../lease-writes.ts";

const keyed = (key: string, onConflict: "block" | "discard", limit = 1) => ({ concurrency: { key, limit, onConflict } });

/** A scheduled job of `key`, due in 1 s. */
function delayed(t: CaseContext, key: string, onConflict: "block" | "discard") {
  return insert(t, { ...keyed(key, onConflict), state: "scheduled", runAt: t.clock.now() + 1_000 });
}

/** A key's conflict policy (block or discard) is stored with the job and applied when a delayed, retried or replayed job falls due. */
export const keyPolicyCases: ConformanceCase[] = [
  {
    name: "keys › a delayed discard job whose key is full when it falls due is cancelled with the reason and never runs",
    async run(t) {
      const holder = await insert(t, keyed("k", "block"));
      const job = await delayed(t, "k", "discard");
      assert.equal(job.onConflict, "discard");
      t.clock.advance(1_000);
      const claimed = await claim(t, 10);
      assert.deepEqual(claimed.map((j) => j.id), [holder.id]);
      const after = await t.adapter.get({ id: job.id });
      assert.equal(after?.state, "cancelled");
      assert.equal(after?.lastError, discardReason("k", 1));
      assert.equal(after?.finishedAt, t.clock.now());
      await settleOne(t.adapter, { kind: "complete", id: holder.id, leaseToken: claimed[0]!.leaseToken!, now: t.clock.now() });
      assert.deepEqual(await claim(t, 10), [], "the discarded job never runs");
    },
  },
  {
    name: "keys › a delayed discard job whose key has room when it falls due is admitted",
    async run(t) {
      const job = await delayed(t, "k", "discard");
      t.clock.advance(1_000);
      assert.deepEqual((await claim(t, 10)).map((j) => j.id), [job.id]);
    },
  },
  {
    name: "keys › a delayed block job whose key is full when it falls due is blocked, and runs when the slot frees",
    async run(t) {
      await insert(t, keyed("k", "block"));
      const job = await delayed(t, "k", "block");
      assert.equal(job.onConflict, "block");
      t.clock.advance(1_000);
      const [holder] = await claim(t, 10);
      assert.equal((await t.adapter.get({ id: job.id }))?.state, "blocked");
      await settleOne(t.adapter, { kind: "complete", id: holder!.id, leaseToken: holder!.leaseToken!, now: t.clock.now() });
      assert.deepEqual((await claim(t, 10)).map((j) => j.id), [job.id]);
    },
  },
  {
    name: "keys › a replayed dead discard job whose key is full when it falls due is discarded",
    async run(t) {
      const job = await insert(t, keyed("k", "discard"));
      const [running] = await claim(t, 1);
      assert.equal(running?.id, job.id);
      await settleOne(t.adapter, { kind: "fail", id: job.id, leaseToken: running!.leaseToken!, now: t.clock.now(), error: "x", retryAt: null });
      const holder = await insert(t, keyed("k", "block"));
      assert.equal(holder.state, "ready");
      await t.adapter.replay({ id: job.id, now: t.clock.now() });
      await claim(t, 10);
      const after = await t.adapter.get({ id: job.id });
      assert.equal(after?.state, "cancelled");
      assert.equal(after?.lastError, discardReason("k", 1));
    },
  },
  {
    name: "keys › an unkeyed job stores no policy",
    async run(t) {
      const job = await insert(t);
      assert.equal(job.onConflict, null);
    },
  },
  {
    name: "keys › a slot-freeing write told the job has no key (a wrong hint) still frees the slot and promotes the next job",
    async run(t) {
      const a = await insert(t, keyed("k", "block"));
      const b = await insert(t, keyed("k", "block"));
      assert.equal(b.state, "blocked");
      const [running] = await claim(t, 1);
      assert.equal(running?.id, a.id);
      const done = await settleOne(t.adapter, { kind: "complete", id: a.id, leaseToken: running!.leaseToken!, now: t.clock.now(), concurrencyKey: null });
      assert.equal(done?.state, "succeeded");
      assert.equal((await t.adapter.get({ id: b.id }))?.state, "ready", "the blocked job was promoted in the same write");
    },
  },
  {
    name: "keys › a slot-freeing write with the right 'no key' hint moves an unkeyed job, and a lost race still returns null",
    async run(t) {
      await insert(t);
      const [running] = await claim(t, 1);
      const fence = { id: running!.id, leaseToken: running!.leaseToken!, now: t.clock.now(), concurrencyKey: null };
      assert.equal((await settleOne(t.adapter, { kind: "complete", ...fence }))?.state, "succeeded");
      assert.equal(await settleOne(t.adapter, { kind: "complete", ...fence }), null);
      assert.equal(await settleOne(t.adapter, { kind: "fail", ...fence, error: "x", retryAt: null }), null);
    },
  },
];
