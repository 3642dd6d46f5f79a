import assert from "node:assert/strict";
import type { DocketAdapter } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { LEASE_MS, claim, insert, newJob, token } from "./helpers.ts";
import { extendLease, settleOne } from "../lease-writes.ts";

const block = (key: string, limit = 1) => ({ concurrency: { key, limit, onConflict: "block" as const } });

/** Jobs of `key` by state. */
export async function keyStates(adapter: DocketAdapter, key: string): Promise<Record<string, number[]>> {
  const out: Record<string, number[]> = {};
  for (const j of await adapter.list({ limit: 10_000 })) if (j.concurrencyKey === key) (out[j.state] ??= []).push(j.id);
  return out;
}

/**
 * I2/I4/I10 for one key: admitted (ready + running) never above the limit,
 * and no blocked job while the key has room.
 */
export async function assertKeyExact(adapter: DocketAdapter, key: string, limit: number, what = ""): Promise<void> {
  const s = await keyStates(adapter, key);
  const admitted = (s.ready?.length ?? 0) + (s.running?.length ?? 0);
  assert.ok(admitted <= limit, `${what}key ${key}: ${admitted} admitted, limit ${limit} (${JSON.stringify(s)})`);
  if ((s.blocked?.length ?? 0) > 0) assert.equal(admitted, limit, `${what}key ${key}: blocked jobs wait while the key has room (${JSON.stringify(s)})`);
}

async function running(t: CaseContext, queue = "default"): Promise<JobRecord> {
  const [j] = await claim(t, 1, t.adapter, [queue]);
  assert.ok(j, "expected a job to claim");
  return j;
}

/** Each way a running job can give up its slot, applied to `job`. */
const FREEING: [string, (t: CaseContext, job: JobRecord) => Promise<unknown>][] = [
  ["complete", (t, j) => settleOne(t.adapter, { kind: "complete", id: j.id, leaseToken: j.leaseToken!, now: t.clock.now() })],
  ["fail with a retry", (t, j) => settleOne(t.adapter, { kind: "fail", id: j.id, leaseToken: j.leaseToken!, now: t.clock.now(), error: "x", retryAt: t.clock.now() + 60_000 })],
  ["fail to dead", (t, j) => settleOne(t.adapter, { kind: "fail", id: j.id, leaseToken: j.leaseToken!, now: t.clock.now(), error: "x", retryAt: null })],
  ["cancel", (t, j) => t.adapter.cancel({ id: j.id, now: t.clock.now() })],
  [
    "reclaim after lease expiry",
    (t, j) => {
      const now = t.clock.advance(LEASE_MS + 1);
      return t.adapter.expire({ id: j.id, leaseToken: j.leaseToken!, now, error: "expired", retryAt: now + 60_000 });
    },
  ],
];

export const keyCases: ConformanceCase[] = [
  {
    name: "keys › with limit 1 a second job of the key is blocked; limit 2 admits two",
    async run(t) {
      const a = await insert(t, block("k"));
      const b = await insert(t, block("k"));
      assert.equal(a.state, "ready");
      assert.equal(b.state, "blocked");
      assert.equal(b.concurrencyKey, "k");
      const c = await insert(t, block("k2", 2));
      const d = await insert(t, block("k2", 2));
      const e = await insert(t, block("k2", 2));
      assert.deepEqual([c.state, d.state, e.state], ["ready", "ready", "blocked"]);
      assert.deepEqual((await claim(t, 10)).map((j) => j.id).sort((x, y) => x - y), [a.id, c.id, d.id]);
    },
  },
  {
    name: "keys › onConflict discard stores the conflicting job cancelled, with the reason",
    async run(t) {
      await insert(t, block("k"));
      const dropped = await insert(t, { concurrency: { key: "k", limit: 1, onConflict: "discard" } });
      assert.equal(dropped.state, "cancelled");
      assert.match(dropped.lastError ?? "", /discarded: concurrency key "k" is full/);
    },
  },
  ...FREEING.map(([how, free]) => ({
    name: `keys › ${how} promotes the next blocked job in the same transaction`,
    async run(t: CaseContext) {
      await insert(t, block("k"));
      const waiting = await insert(t, block("k"));
      const job = await running(t);
      await free(t, job);
      assert.equal((await t.adapter.get({ id: waiting.id }))?.state, "ready", "promoted as soon as the write returned");
      await assertKeyExact(t.adapter, "k", 1);
    },
  })),
  {
    name: "keys › cancelling a ready (admitted) job promotes the next; cancelling a blocked one changes nothing else",
    async run(t) {
      const a = await insert(t, block("k"));
      const b = await insert(t, block("k"));
      const c = await insert(t, block("k"));
      await t.adapter.cancel({ id: c.id, now: t.clock.now() });
      assert.equal((await t.adapter.get({ id: b.id }))?.state, "blocked");
      await t.adapter.cancel({ id: a.id, now: t.clock.now() });
      assert.equal((await t.adapter.get({ id: b.id }))?.state, "ready");
    },
  },
  {
    name: "keys › a released job keeps its slot: nothing is admitted beside it (R3, R6)",
    async run(t) {
      await insert(t, block("k"));
      const waiting = await insert(t, block("k"));
      const job = await running(t);
      assert.ok(await settleOne(t.adapter, { kind: "release", id: job.id, leaseToken: job.leaseToken!, now: t.clock.now() }));
      assert.equal((await t.adapter.get({ id: waiting.id }))?.state, "blocked");
      await assertKeyExact(t.adapter, "k", 1);
      const again = await running(t);
      assert.equal(again.id, job.id);
      await settleOne(t.adapter, { kind: "complete", id: again.id, leaseToken: again.leaseToken!, now: t.clock.now() });
      assert.equal((await t.adapter.get({ id: waiting.id }))?.state, "ready", "the slot was not lost either");
    },
  },
  {
    name: "keys › a heartbeating job keeps its slot however long it runs; an expired one frees it only when reclaimed (R2)",
    async run(t) {
      await insert(t, block("k"));
      const waiting = await insert(t, block("k"));
      const job = await running(t);
      for (let i = 0; i < 5; i++) {
        const now = t.clock.advance(LEASE_MS - 1);
        assert.ok(await extendLease(t.adapter, { id: job.id, leaseToken: job.leaseToken!, now, leaseExpiresAt: now + LEASE_MS }));
        assert.deepEqual(await t.adapter.listExpired({ now, limit: 10 }), []);
        assert.equal((await t.adapter.get({ id: waiting.id }))?.state, "blocked");
      }
      const now = t.clock.advance(LEASE_MS + 1);
      assert.equal((await t.adapter.get({ id: waiting.id }))?.state, "blocked", "expiry alone frees nothing");
      const [expired] = await t.adapter.listExpired({ now, limit: 10 });
      await t.adapter.expire({ id: expired!.id, leaseToken: expired!.leaseToken!, now, error: "lost", retryAt: now + 60_000 });
      assert.equal((await t.adapter.get({ id: waiting.id }))?.state, "ready");
    },
  },
  {
    name: "keys › a delayed job is admitted when due: ready when the key has room, else blocked",
    async run(t) {
      const now = t.clock.now();
      const early = await insert(t, { ...block("k"), state: "scheduled", runAt: now + 1000 });
      const late = await insert(t, { ...block("k"), state: "scheduled", runAt: now + 2000 });
      assert.equal(early.state, "scheduled");
      t.clock.advance(2000);
      const [got] = await claim(t, 10);
      assert.equal(got?.id, early.id);
      assert.equal((await t.adapter.get({ id: late.id }))?.state, "blocked");
      await settleOne(t.adapter, { kind: "complete", id: got!.id, leaseToken: got!.leaseToken!, now: t.clock.now() });
      assert.equal((await t.adapter.get({ id: late.id }))?.state, "ready");
    },
  },
  {
    name: "keys › promotion follows priority, then run_at, then id",
    async run(t) {
      await insert(t, block("k"));
      const low = await insert(t, { ...block("k"), priority: 5 });
      const high = await insert(t, { ...block("k"), priority: 1 });
      const job = await running(t);
      await settleOne(t.adapter, { kind: "complete", id: job.id, leaseToken: job.leaseToken!, now: t.clock.now() });
      assert.equal((await t.adapter.get({ id: high.id }))?.state, "ready");
      assert.equal((await t.adapter.get({ id: low.id }))?.state, "blocked");
    },
  },
  {
    name: "keys › a later enqueue with a higher limit raises the key's limit and admits waiting jobs",
    async run(t) {
      await insert(t, block("k", 1));
      const waiting = await insert(t, block("k", 1));
      const third = await insert(t, block("k", 3));
      assert.equal((await t.adapter.get({ id: waiting.id }))?.state, "ready");
      assert.equal(third.state, "ready");
      await assertKeyExact(t.adapter, "k", 3);
    },
  },
  {
    name: "keys › a replayed dead job goes back through admission",
    async run(t) {
      await insert(t, { ...block("k"), maxAttempts: 1 });
      const job = await running(t);
      await settleOne(t.adapter, { kind: "fail", id: job.id, leaseToken: job.leaseToken!, now: t.clock.now(), error: "x", retryAt: null });
      const holder = await insert(t, block("k"));
      assert.equal(holder.state, "ready");
      await t.adapter.replay({ id: job.id, now: t.clock.now() });
      await claim(t, 0);
      await t.adapter.claim({ queues: ["none"], limit: 1, now: t.clock.now(), leaseToken: token(), leaseExpiresAt: t.clock.now() + LEASE_MS });
      assert.equal((await t.adapter.get({ id: job.id }))?.state, "blocked");
      await assertKeyExact(t.adapter, "k", 1);
    },
  },
  {
    name: "keys › concurrent enqueues, claims and completions on separate connections keep every key exact (R1, R4, I10)",
    slow: true,
    async run(t) {
      const conns = [t.adapter, await t.connect(), await t.connect(), await t.connect()];
      const keys = ["a", "b", "c"];
      const limits: Record<string, number> = { a: 1, b: 2, c: 3 };
      for (let round = 0; round < 25; round++) {
        const now = t.clock.advance(1);
        await Promise.all(
          conns.map(async (c, i) => {
            const key = keys[(round + i) % keys.length]!;
            const [job] = await c.enqueue({ jobs: [newJob({ runAt: now, ...block(key, limits[key]) })], now });
            const [mine] = await c.claim({ queues: ["default"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
            if (mine && (round + i) % 2 === 0) await settleOne(c, { kind: "complete", id: mine.id, leaseToken: mine.leaseToken!, now });
            else if (mine) await c.cancel({ id: mine.id, now });
            return job;
          }),
        );
        for (const k of keys) await assertKeyExact(t.adapter, k, limits[k]!, `round ${round}: `);
      }
    },
  },
];
