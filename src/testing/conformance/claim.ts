import assert from "node:assert/strict";
import type { ConformanceCase } from "../harness.ts";
import { LEASE_MS, claim, insert } from "./helpers.ts";

export const claimCases: ConformanceCase[] = [
  {
    name: "claim › orders by priority (smaller first), then run_at, then id",
    async run(t) {
      const now = t.clock.now();
      const a = await insert(t, { priority: 5, runAt: now - 10 });
      const b = await insert(t, { priority: 1, runAt: now });
      const c = await insert(t, { priority: 1, runAt: now - 5 });
      const d = await insert(t, { priority: 1, runAt: now - 5 });
      const claimed = await claim(t, 10);
      assert.deepEqual(claimed.map((j) => j.id), [c.id, d.id, b.id, a.id]);
      const one = await insert(t, { priority: 9 });
      const two = await insert(t, { priority: -9 });
      assert.deepEqual((await claim(t, 1)).map((j) => j.id), [two.id]);
      assert.deepEqual((await claim(t, 1)).map((j) => j.id), [one.id]);
    },
  },
  {
    name: "claim › does not claim a job scheduled in the future, and claims it once due",
    async run(t) {
      const job = await insert(t, { state: "scheduled", runAt: t.clock.now() + 1000 });
      assert.deepEqual(await claim(t, 10), []);
      t.clock.advance(999);
      assert.deepEqual(await claim(t, 10), []);
      t.clock.advance(1);
      assert.deepEqual((await claim(t, 10)).map((j) => j.id), [job.id]);
    },
  },
  {
    name: "claim › takes only from the queues asked for",
    async run(t) {
      const mail = await insert(t, { queue: "mail" });
      await insert(t, { queue: "other" });
      assert.deepEqual((await claim(t, 10, t.adapter, ["mail", "nothing"])).map((j) => j.id), [mail.id]);
      assert.deepEqual(await claim(t, 10, t.adapter, ["mail"]), []);
    },
  },
  {
    name: "claim › returns at most `limit` jobs, and none for limit 0",
    async run(t) {
      for (let i = 0; i < 5; i++) await insert(t);
      assert.equal((await claim(t, 0)).length, 0);
      assert.equal((await claim(t, 3)).length, 3);
      assert.equal((await claim(t, 3)).length, 2);
      assert.equal((await claim(t, 3)).length, 0);
    },
  },
  {
    name: "claim › stamps the lease token, the lease expiry and attempt + 1",
    async run(t) {
      const job = await insert(t);
      const now = t.clock.now();
      const [got] = await t.adapter.claim({ queues: ["default"], limit: 1, now, leaseToken: "L1", leaseExpiresAt: now + LEASE_MS });
      assert.ok(got);
      assert.equal(got.id, job.id);
      assert.equal(got.state, "running");
      assert.equal(got.leaseToken, "L1");
      assert.equal(got.leaseExpiresAt, now + LEASE_MS);
      assert.equal(got.attempt, 1);
      assert.deepEqual(await t.adapter.get({ id: job.id }), got);
    },
  },
];
