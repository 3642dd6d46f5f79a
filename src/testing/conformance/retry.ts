import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import { InvalidStateError, NotFoundError } from "../../core/errors.ts";
import type { ConformanceCase } from "../harness.ts";
import { LEASE_MS, claim, claimOne, stateOf } from "./helpers.ts";
import { settleOne } from "../lease-writes.ts";

export const retryCases: ConformanceCase[] = [
  {
    name: "retry › a failed attempt is retried after its backoff, then dead after maxAttempts",
    async run(t) {
      const d = t.docket({ retry: { baseMs: 1000, factor: 2, jitter: 0 } });
      const job = await d.enqueue("t", {}, { maxAttempts: 3 });
      const expectedDelays = [1000, 2000];
      for (let attempt = 1; attempt <= 3; attempt++) {
        const running = await claimOne(t);
        assert.equal(running.id, job.id);
        assert.equal(running.attempt, attempt);
        const now = t.clock.now();
        const plan = d.planFailure(running, now);
        const failed = await settleOne(t.adapter, {
          kind: "fail",
          id: running.id,
          leaseToken: running.leaseToken!,
          now,
          error: `boom ${attempt}`,
          retryAt: plan.kind === "retry" ? plan.runAt : null,
        });
        if (attempt < 3) {
          assert.equal(failed?.state, "scheduled");
          assert.equal(failed?.runAt, now + expectedDelays[attempt - 1]!);
          t.clock.advance(expectedDelays[attempt - 1]! - 1);
          assert.deepEqual(await claim(t, 1), [], "not claimable before its backoff elapsed");
          t.clock.advance(1);
        } else {
          assert.equal(failed?.state, "dead");
          assert.equal(failed?.lastError, "boom 3");
        }
      }
      assert.equal((await d.deadLetters.list()).length, 1);
    },
  },
  {
    name: "retry › per-job backoff overrides are stored with the job and win over the docket's",
    async run(t) {
      const d = t.docket({ retry: { baseMs: 1000, jitter: 0 } });
      await d.enqueue("t", {}, { backoff: { baseMs: 50, jitter: 0 } });
      const running = await claimOne(t);
      const plan = d.planFailure(running, t.clock.now());
      assert.deepEqual(plan, { kind: "retry", runAt: t.clock.now() + 50 });
    },
  },
  {
    name: "reclaim › an expired lease counts as a failed attempt: retried, then dead",
    async run(t) {
      const d = t.docket({ retry: { baseMs: 10, jitter: 0 } });
      const job = await d.enqueue("t", {}, { maxAttempts: 2 });
      await claimOne(t);
      t.clock.advance(LEASE_MS + 1);
      assert.deepEqual(await d.reclaimExpired(), { retried: 1, dead: 0 });
      const after = await d.get(job.id);
      assert.equal(after?.state, "scheduled");
      assert.match(after?.lastError ?? "", /lease expired/);
      t.clock.advance(10);
      await claimOne(t);
      t.clock.advance(LEASE_MS + 1);
      assert.deepEqual(await d.reclaimExpired(), { retried: 0, dead: 1 });
      assert.equal(await stateOf(t, job.id), "dead");
    },
  },
  {
    name: "reclaim › many sweepers at once move each expired job exactly once",
    async run(t) {
      const d = t.docket({ retry: { baseMs: 10, jitter: 0 } });
      await d.enqueueMany(Array.from({ length: 20 }, () => ({ task: "t", payload: null })));
      assert.equal((await claim(t, 20)).length, 20);
      t.clock.advance(LEASE_MS + 1);
      const others = await Promise.all([t.connect(), t.connect(), t.connect()]);
      const dockets = [d, ...others.map((adapter) => new Docket({ adapter, clock: t.clock, retry: { baseMs: 10, jitter: 0 } }))];
      const results = await Promise.all(dockets.map((x) => x.reclaimExpired()));
      assert.equal(results.reduce((n, r) => n + r.retried + r.dead, 0), 20);
      assert.equal((await t.adapter.list({ state: "scheduled", limit: 100 })).length, 20);
    },
  },
  {
    name: "cancel (docket) › unknown id is NotFoundError; a finished job is InvalidStateError",
    async run(t) {
      const d = t.docket();
      await assert.rejects(() => d.cancel(424242), NotFoundError);
      const job = await d.enqueue("t", {});
      await d.cancel(job.id);
      await assert.rejects(() => d.cancel(job.id), InvalidStateError);
    },
  },
  {
    name: "replay › a dead job is due again with a fresh attempt budget; concurrent replays win once",
    async run(t) {
      const d = t.docket();
      const job = await d.enqueue("t", {}, { maxAttempts: 1 });
      const running = await claimOne(t);
      await settleOne(t.adapter, { kind: "fail", id: running.id, leaseToken: running.leaseToken!, now: t.clock.now(), error: "x", retryAt: null });
      const others = await Promise.all([t.connect(), t.connect()]);
      const replays = await Promise.allSettled([
        d.deadLetters.replay(job.id),
        ...others.map((adapter) => adapter.replay({ id: job.id, now: t.clock.now() }).then((r) => r ?? Promise.reject(new NotFoundError(job.id)))),
      ]);
      assert.equal(replays.filter((r) => r.status === "fulfilled").length, 1);
      for (const r of replays) if (r.status === "rejected") assert.ok(r.reason instanceof NotFoundError);
      const after = await d.get(job.id);
      assert.equal(after?.state, "scheduled");
      assert.equal(after?.runAt, t.clock.now());
      assert.equal(after?.attempt, 0);
      assert.equal((await claimOne(t)).id, job.id);
      await assert.rejects(() => d.deadLetters.replay(job.id), NotFoundError);
    },
  },
];
