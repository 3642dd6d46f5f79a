import assert from "node:assert/strict";
import type { SettleItem } from "../../core/adapter.ts";
import { Docket } from "../../client/docket.ts";
import type { WorkerEvent } from "../../worker/index.ts";
import type { ConformanceCase } from "../harness.ts";
import { withFaults } from "./faults.ts";
import { LEASE_MS, claim, eventually, insert, token } from "./helpers.ts";
import { settleOne } from "../lease-writes.ts";

/** Batched outcomes, and the prefetch buffer after a crash. */
export const settleCases: ConformanceCase[] = [
  {
    name: "settle › a batch writes only the jobs whose leases it holds: a cancelled job and a reclaimed, re-claimed one come back null and keep the winner's write",
    async run(t) {
      for (const hint of [null, undefined]) {
        const held = await insert(t);
        const cancelled = await insert(t);
        const stolen = await insert(t);
        const jobs = await claim(t, 3);
        assert.deepEqual(jobs.map((j) => j.id), [held.id, cancelled.id, stolen.id]);
        const tok = jobs[0]!.leaseToken!;
        await t.adapter.cancel({ id: cancelled.id, now: t.clock.now() });
        let now = t.clock.advance(LEASE_MS + 1);
        assert.equal((await t.adapter.expire({ id: stolen.id, leaseToken: tok, now, error: "lost", retryAt: now }))?.state, "scheduled");
        // The two remaining jobs of the first claim still hold tok; claim the stolen one again (other jobs are running).
        const [again] = await t.adapter.claim({ queues: ["default"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
        assert.equal(again?.id, stolen.id);
        now = t.clock.advance(1);
        const items: SettleItem[] = jobs.map((j) => ({ kind: "complete", id: j.id, leaseToken: tok, now, concurrencyKey: hint }));
        const results = await t.adapter.settle({ items });
        assert.equal(results.length, 3);
        assert.equal(results[0]?.state, "succeeded");
        assert.equal(results[0]?.finishedAt, now);
        assert.equal(results[0]?.leaseToken, null);
        assert.equal(results[1], null, "the cancelled job's outcome lost");
        assert.equal(results[2], null, "the re-claimed job's outcome lost");
        assert.equal((await t.adapter.get({ id: cancelled.id }))?.state, "cancelled");
        const stillRunning = await t.adapter.get({ id: stolen.id });
        assert.equal(stillRunning?.state, "running");
        assert.equal(stillRunning?.leaseToken, again!.leaseToken, "the new holder's lease is untouched");
        await settleOne(t.adapter, { kind: "complete", id: stolen.id, leaseToken: again!.leaseToken!, now });
      }
    },
  },
  {
    name: "settle › a job named twice in one batch (a stale attempt beside the fresh one) is written once, for the fresh lease only",
    async run(t) {
      const job = await insert(t);
      const [first] = await claim(t, 1);
      let now = t.clock.advance(LEASE_MS + 1);
      await t.adapter.expire({ id: job.id, leaseToken: first!.leaseToken!, now, error: "lost", retryAt: now });
      const [fresh] = await claim(t, 1);
      assert.equal(fresh?.id, job.id);
      now = t.clock.advance(1);
      const item = (leaseToken: string) => ({ kind: "complete" as const, id: job.id, leaseToken, now, concurrencyKey: null });
      const results = await t.adapter.settle({ items: [item(first!.leaseToken!), item(fresh!.leaseToken!)] });
      assert.equal(results[0], null, "the stale attempt's outcome lost");
      assert.equal(results[1]?.state, "succeeded");
      assert.equal(results[1]?.attempt, 2);
    },
  },
  {
    name: "settle › a batch from two claims fences each job by its own token: a job named with the other claim's token is not written, and neither are its leases extended",
    async run(t) {
      const [a1, a2, b1] = [await insert(t), await insert(t), await insert(t)];
      const fromA = await claim(t, 2);
      const fromB = await claim(t, 1);
      assert.deepEqual([...fromA, ...fromB].map((j) => j.id), [a1.id, a2.id, b1.id]);
      const tokA = fromA[0]!.leaseToken!;
      const tokB = fromB[0]!.leaseToken!;
      const now = t.clock.advance(1);
      // a2 named with B's token: its id and that token are each in the batch, but not as a pair.
      const crossed = [
        { id: a1.id, leaseToken: tokA },
        { id: a2.id, leaseToken: tokB },
        { id: b1.id, leaseToken: tokB },
      ];
      const extended = await t.adapter.extendLeases({ items: crossed, now, leaseExpiresAt: now + 2 * LEASE_MS });
      assert.deepEqual(extended.map((k) => k.id).sort(), [a1.id, b1.id].sort());
      assert.deepEqual((await t.adapter.heldLeases({ items: crossed })).map((k) => k.id).sort(), [a1.id, b1.id].sort());
      const results = await t.adapter.settle({ items: crossed.map((k) => ({ kind: "complete" as const, ...k, now, concurrencyKey: null })) });
      assert.deepEqual(results.map((r) => r?.state ?? null), ["succeeded", null, "succeeded"]);
      const a2Now = await t.adapter.get({ id: a2.id });
      assert.equal(a2Now?.state, "running");
      assert.equal(a2Now?.leaseToken, tokA, "its holder's lease is untouched");
      assert.equal(a2Now?.leaseExpiresAt, fromA[1]!.leaseExpiresAt, "and was not extended");
    },
  },
  {
    name: "settle › complete, retry, bury and release in one batch write exactly what the single calls write",
    async run(t) {
      const ids = [];
      for (let i = 0; i < 4; i++) ids.push((await insert(t)).id);
      const jobs = await claim(t, 4);
      const now = t.clock.advance(10);
      const tok = jobs[0]!.leaseToken!;
      const base = (id: number) => ({ id, leaseToken: tok, now, concurrencyKey: null });
      const results = await t.adapter.settle({
        items: [
          { kind: "complete", ...base(ids[0]!) },
          { kind: "fail", ...base(ids[1]!), error: "boom", retryAt: now + 500 },
          { kind: "fail", ...base(ids[2]!), error: "fatal", retryAt: null },
          { kind: "release", ...base(ids[3]!) },
        ],
      });
      assert.deepEqual(results.map((r) => r?.state), ["succeeded", "scheduled", "dead", "ready"]);
      assert.equal(results[1]?.runAt, now + 500);
      assert.equal(results[1]?.lastError, "boom");
      assert.equal(results[1]?.attempt, 1);
      assert.equal(results[2]?.lastError, "fatal");
      assert.equal(results[2]?.finishedAt, now);
      assert.equal(results[3]?.attempt, 0, "a release gives the attempt back");
      for (const r of results) assert.equal(r?.leaseToken, null);
      for (const r of results) assert.equal(r?.updatedAt, now);
    },
  },
  {
    name: "settle › a keyed job completed in a batch passes its slot to the key's blocked job in the same call, also when the caller said it had no key",
    async run(t) {
      for (const hint of ["user:1", null]) {
        const concurrency = { key: `k-${token()}`, limit: 1, onConflict: "block" as const };
        const first = await insert(t, { concurrency });
        const waiting = await insert(t, { concurrency });
        const plain = await insert(t);
        assert.equal(waiting.state, "blocked");
        const jobs = await claim(t, 5);
        assert.deepEqual(jobs.map((j) => j.id).sort(), [first.id, plain.id].sort());
        const now = t.clock.advance(1);
        const tok = jobs[0]!.leaseToken!;
        const results = await t.adapter.settle({
          items: [
            { kind: "complete", id: first.id, leaseToken: tok, now, concurrencyKey: hint === null ? null : concurrency.key },
            { kind: "complete", id: plain.id, leaseToken: tok, now, concurrencyKey: null },
          ],
        });
        assert.deepEqual(results.map((r) => r?.state), ["succeeded", "succeeded"]);
        assert.equal((await t.adapter.get({ id: waiting.id }))?.state, "ready", "the blocked job was promoted");
        const [next] = await claim(t, 1);
        assert.equal(next?.id, waiting.id);
        await settleOne(t.adapter, { kind: "complete", id: next!.id, leaseToken: next!.leaseToken!, now });
      }
    },
  },
  {
    name: "lease › extendLeases extends only the leases still held: not a cancelled job's, not a stale token's, not a re-claimed job's",
    async run(t) {
      const held = await insert(t);
      const cancelled = await insert(t);
      const stolen = await insert(t);
      const jobs = await claim(t, 3);
      const tok = jobs[0]!.leaseToken!;
      await t.adapter.cancel({ id: cancelled.id, now: t.clock.now() });
      let now = t.clock.advance(LEASE_MS + 1);
      await t.adapter.expire({ id: stolen.id, leaseToken: tok, now, error: "lost", retryAt: now });
      // `held` expired too, but nobody reclaimed it: its holder may still extend it.
      const [again] = await t.adapter.claim({ queues: ["default"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      assert.equal(again?.id, stolen.id);
      now = t.clock.advance(1);
      const items = [...jobs.map((j) => ({ id: j.id, leaseToken: tok })), { id: held.id, leaseToken: "not-" + tok }];
      const kept = await t.adapter.extendLeases({ items, now, leaseExpiresAt: now + 5 * LEASE_MS });
      assert.deepEqual(kept, [{ id: held.id, leaseToken: tok }]);
      const after = await t.adapter.get({ id: held.id });
      assert.equal(after?.leaseExpiresAt, now + 5 * LEASE_MS);
      assert.equal(after?.state, "running");
      assert.equal((await t.adapter.get({ id: stolen.id }))?.leaseExpiresAt, again!.leaseExpiresAt, "the new holder's lease is untouched");
      assert.equal((await t.adapter.get({ id: cancelled.id }))?.state, "cancelled");
      assert.deepEqual(await t.adapter.extendLeases({ items: [], now, leaseExpiresAt: now }), []);
    },
  },
  {
    name: "worker › prefetched jobs of a worker that died are reclaimed after their lease and run once by another worker",
    slow: true,
    async run(t) {
      const faulty = withFaults(t.adapter);
      const a = new Docket({ adapter: faulty.adapter, retry: { baseMs: 5, jitter: 0 } });
      const jobs = await a.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ task: "t", payload: i })));
      const runsA: number[] = [];
      const leaseMs = 400;
      const dying = a.worker({
        concurrency: 1,
        prefetch: 4,
        leaseMs,
        heartbeatMs: 100,
        reclaimMs: 60_000,
        pollMs: 60_000,
        logger: null,
        shutdownTimeoutMs: 0,
        handlers: { t: (p, { signal }) => new Promise<void>((resolve) => { runsA.push(p as number); signal.addEventListener("abort", () => resolve()); }) },
      });
      const claimedAt = Date.now();
      await dying.start();
      await eventually(async () => runsA.length === 1 && (await t.adapter.list({ state: "running", limit: 10 })).length === 5, 5_000, "worker A claimed all five");
      assert.equal(runsA.length, 1, "one handler runs, four jobs wait in A's buffer");
      for (const j of await t.adapter.list({ state: "running", limit: 10 })) {
        assert.ok(j.leaseExpiresAt! <= Date.now() + leaseMs, `buffered job ${j.id} is leased for one lease, not longer`);
        assert.ok(j.leaseExpiresAt! >= claimedAt);
      }
      // A "dies": from now on none of its writes reaches the database.
      for (const m of ["heartbeat", "claim", "complete", "fail", "release", "listExpired", "expire", "purge"] as const) {
        faulty.inject(m, { failures: 1_000_000, when: "before" });
      }
      const b = new Docket({ adapter: t.adapter, retry: { baseMs: 5, jitter: 0 } });
      const runsB: number[] = [];
      const events: WorkerEvent[] = [];
      const rescuer = b.worker({
        leaseMs: 2_000,
        heartbeatMs: 200,
        reclaimMs: 50,
        pollMs: 20,
        logger: null,
        handlers: { t: (p) => void runsB.push(p as number) },
        onEvent: (e) => events.push(e),
      });
      await rescuer.start();
      await eventually(async () => {
        const states = await Promise.all(jobs.map(async (j) => (await t.adapter.get({ id: j.id }))?.state));
        return states.every((s) => s === "succeeded");
      }, 10_000, "worker B ran every job A held");
      await rescuer.stop();
      await dying.stop();
      assert.deepEqual([...runsB].sort(), [0, 1, 2, 3, 4], "each job ran once on B");
      for (const j of jobs) assert.equal((await t.adapter.get({ id: j.id }))?.attempt, 2, "A's claim counted as an attempt");
    },
  },
  {
    name: "worker › a graceful stop hands prefetched jobs back as ready at once, without spending their attempts",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter, retry: { baseMs: 5, jitter: 0 } });
      const jobs = await d.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ task: "t", payload: i })));
      let started = 0;
      const w = d.worker({
        concurrency: 2,
        prefetch: 4,
        pollMs: 60_000,
        logger: null,
        handlers: { t: (_p, { signal }) => new Promise<void>((resolve) => { started++; signal.addEventListener("abort", () => resolve()); }) },
      });
      await w.start();
      await eventually(async () => (await t.adapter.list({ state: "running", limit: 10 })).length === 6, 5_000, "all six claimed");
      // The claim is visible before the worker has its answer and starts the handlers.
      await eventually(async () => started >= 2, 5_000, "two handlers started");
      assert.equal(started, 2);
      await w.stop({ timeoutMs: 0 });
      const states = await Promise.all(jobs.map(async (j) => await t.adapter.get({ id: j.id })));
      const ready = states.filter((s) => s?.state === "ready");
      assert.equal(ready.length, 4, "the four buffered jobs are ready again");
      for (const s of ready) assert.equal(s?.attempt, 0, "a buffered job's attempt was given back");
      assert.equal(started, 2, "no buffered job was started during the stop");
    },
  },
];
