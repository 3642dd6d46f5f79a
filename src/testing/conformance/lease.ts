import assert from "node:assert/strict";
import type { ConformanceCase } from "../harness.ts";
import { LEASE_MS, claim, claimOne, insert, stateOf } from "./helpers.ts";
import { extendLease, settleOne } from "../lease-writes.ts";

export const leaseCases: ConformanceCase[] = [
  {
    name: "lease › a stale token cannot heartbeat, complete, fail or release",
    async run(t) {
      await insert(t);
      const job = await claimOne(t);
      const now = t.clock.now();
      const stale = { id: job.id, leaseToken: "not-" + job.leaseToken, now };
      assert.equal(await extendLease(t.adapter, { ...stale, leaseExpiresAt: now + 99 * LEASE_MS }), false);
      assert.equal(await settleOne(t.adapter, { kind: "complete", ...stale }), null);
      assert.equal(await settleOne(t.adapter, { kind: "fail", ...stale, error: "x", retryAt: now }), null);
      assert.equal(await settleOne(t.adapter, { kind: "fail", ...stale, error: "x", retryAt: null }), null);
      assert.equal(await settleOne(t.adapter, { kind: "release", ...stale }), null);
      assert.deepEqual(await t.adapter.get({ id: job.id }), job);
    },
  },
  {
    name: "lease › the holder's heartbeat extends the lease and nothing else",
    async run(t) {
      await insert(t);
      const job = await claimOne(t);
      const now = t.clock.advance(1000);
      assert.ok(await extendLease(t.adapter, { id: job.id, leaseToken: job.leaseToken!, now, leaseExpiresAt: now + LEASE_MS }));
      const beat = await t.adapter.get({ id: job.id });
      assert.ok(beat);
      assert.equal(beat.leaseExpiresAt, now + LEASE_MS);
      assert.equal(beat.state, "running");
      assert.equal(beat.attempt, job.attempt);
      assert.equal(beat.leaseToken, job.leaseToken);
    },
  },
  {
    name: "lease › after expiry and re-claim, the first holder can no longer write",
    async run(t) {
      await insert(t);
      const first = await claimOne(t);
      const now = t.clock.advance(LEASE_MS + 1);
      const expired = await t.adapter.expire({ id: first.id, leaseToken: first.leaseToken!, now, error: "lost", retryAt: now });
      assert.equal(expired?.state, "scheduled");
      const second = await claimOne(t);
      assert.equal(second.id, first.id);
      assert.equal(second.attempt, 2);
      assert.equal(await settleOne(t.adapter, { kind: "complete", id: first.id, leaseToken: first.leaseToken!, now }), null);
      assert.equal(await extendLease(t.adapter, { id: first.id, leaseToken: first.leaseToken!, now, leaseExpiresAt: now + LEASE_MS }), false);
      assert.ok(await settleOne(t.adapter, { kind: "complete", id: second.id, leaseToken: second.leaseToken!, now }));
    },
  },
  {
    name: "expire › does not expire a lease that has not expired yet",
    async run(t) {
      await insert(t);
      const job = await claimOne(t);
      const now = t.clock.advance(LEASE_MS - 1);
      assert.deepEqual(await t.adapter.listExpired({ now, limit: 10 }), []);
      assert.equal(await t.adapter.expire({ id: job.id, leaseToken: job.leaseToken!, now, error: "x", retryAt: now }), null);
      assert.equal(await stateOf(t, job.id), "running");
    },
  },
  {
    name: "expire › does not expire a job whose holder heartbeated after the sweeper looked",
    async run(t) {
      await insert(t);
      const job = await claimOne(t);
      const now = t.clock.advance(LEASE_MS + 1);
      const [seen] = await t.adapter.listExpired({ now, limit: 10 });
      assert.equal(seen?.id, job.id);
      assert.ok(await extendLease(t.adapter, { id: job.id, leaseToken: job.leaseToken!, now, leaseExpiresAt: now + LEASE_MS }));
      assert.equal(await t.adapter.expire({ id: job.id, leaseToken: seen.leaseToken!, now, error: "x", retryAt: now }), null);
      assert.equal(await stateOf(t, job.id), "running");
    },
  },
  {
    name: "release › hands the job back as ready without counting the attempt",
    async run(t) {
      await insert(t);
      const job = await claimOne(t);
      const released = await settleOne(t.adapter, { kind: "release", id: job.id, leaseToken: job.leaseToken!, now: t.clock.now() });
      assert.equal(released?.state, "ready");
      assert.equal(released?.attempt, 0);
      assert.equal(released?.leaseToken, null);
      assert.equal((await claim(t, 1))[0]?.attempt, 1);
    },
  },
  {
    name: "cancel › revokes a running job's lease: its holder can no longer complete it",
    async run(t) {
      await insert(t);
      const job = await claimOne(t);
      const now = t.clock.now();
      assert.equal((await t.adapter.cancel({ id: job.id, now }))?.state, "cancelled");
      assert.equal(await settleOne(t.adapter, { kind: "complete", id: job.id, leaseToken: job.leaseToken!, now }), null);
      assert.equal(await stateOf(t, job.id), "cancelled");
      assert.deepEqual(await claim(t, 10), []);
    },
  },
];
