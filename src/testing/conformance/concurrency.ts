import assert from "node:assert/strict";
import type { DocketAdapter } from "../../core/adapter.ts";
import type { ConformanceCase } from "../harness.ts";
import { LEASE_MS, newJob, token } from "./helpers.ts";
import { settleOne } from "../lease-writes.ts";

const ROUNDS = 50;
const MAX_CLAIMERS = 8;

/** A small deterministic PRNG, so a failing round can be reproduced from its number. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let x = Math.imul(s ^ (s >>> 15), 1 | s);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

export const concurrencyCases: ConformanceCase[] = [
  {
    name: `claim › ${ROUNDS} rounds of 2–${MAX_CLAIMERS} concurrent claimers on separate connections never claim a job twice`,
    slow: true,
    async run(t) {
      const claimers: DocketAdapter[] = [t.adapter];
      for (let i = 1; i < MAX_CLAIMERS; i++) claimers.push(await t.connect());
      const random = prng(0xd0c3);
      for (let round = 0; round < ROUNDS; round++) {
        const k = 2 + Math.floor(random() * (MAX_CLAIMERS - 1));
        const jobs = 1 + Math.floor(random() * 12);
        const now = t.clock.advance(1);
        const queue = `q${round}`;
        await t.adapter.enqueue({ jobs: Array.from({ length: jobs }, () => newJob({ queue, runAt: now })), now });
        const results = await Promise.all(
          claimers.slice(0, k).map((a) =>
            a.claim({ queues: [queue], limit: 1 + Math.floor(random() * 4), now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS }),
          ),
        );
        const ids = results.flat().map((j) => j.id);
        assert.equal(new Set(ids).size, ids.length, `round ${round}: a job was claimed twice (${ids.join(",")})`);
        for (const [i, batch] of results.entries()) {
          for (const j of batch) {
            const row = await t.adapter.get({ id: j.id });
            assert.equal(row?.leaseToken, j.leaseToken, `round ${round}: claimer ${i} holds job ${j.id} but the row says otherwise`);
            assert.equal(row?.attempt, 1, `round ${round}: job ${j.id} attempt counted twice`);
          }
        }
        const running = await t.adapter.list({ queue, state: "running", limit: 100 });
        assert.equal(running.length, ids.length, `round ${round}: running rows differ from claimed jobs`);
      }
    },
  },
  {
    name: "cancel vs claim › racing on separate connections, exactly one wins and a cancelled job never runs",
    slow: true,
    async run(t) {
      const other = await t.connect();
      for (let round = 0; round < 20; round++) {
        const now = t.clock.advance(1);
        const queue = `c${round}`;
        const [job] = await t.adapter.enqueue({ jobs: [newJob({ queue, runAt: now })], now });
        const [claimed, cancelled] = await Promise.all([
          other.claim({ queues: [queue], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS }),
          t.adapter.cancel({ id: job!.id, now }),
        ]);
        assert.ok(cancelled, `round ${round}: cancel must win against ready or running`);
        if (claimed.length === 1) {
          // Claim won first: the cancel revoked its lease, so its completion is refused.
          assert.equal(await settleOne(other, { kind: "complete", id: job!.id, leaseToken: claimed[0]!.leaseToken!, now }), null);
        }
        assert.equal((await t.adapter.get({ id: job!.id }))?.state, "cancelled");
      }
    },
  },
];
