/**
 * repairKeys against a key that was never stranded: its unlocked read saw a
 * blocked job, which a completion then promoted, and under the key's lock
 * the only job left to admit is a due scheduled one. The rebalance admits
 * it, but that is staging, not a repair: no key is reported (a worker's
 * sweep would otherwise report `keyRepaired` for a healthy key, as the
 * PostgreSQL kill chaos once did for a child its last parent had just
 * released).
 */
import assert from "node:assert/strict";
import type { KyselyConformanceCase } from "../harness.ts";
import { LEASE_MS, newJob, token } from "../../conformance/helpers.ts";
import { settleOne } from "../../lease-writes.ts";
import { sessions } from "./races.ts";

export const repairCases: KyselyConformanceCase[] = [
  {
    name: "maintenance › repairKeys reports no key when, under the key's lock, it only admits a due scheduled job (a completion promoted the blocked job it had read)",
    async run(t) {
      const { hook, s1, s2 } = await sessions(t, "repairKeys and a due scheduled job");
      const now = t.clock.now();
      const concurrency = { key: "k", limit: 2, onConflict: "block" as const };
      const [a, b, c, s] = await t.adapter.enqueue({
        jobs: [
          newJob({ queue: "q", runAt: now, concurrency }),
          newJob({ queue: "q", runAt: now, concurrency }),
          newJob({ queue: "q", runAt: now, concurrency }),
          newJob({ queue: "q", runAt: now + 1000, state: "scheduled", concurrency }),
        ],
        now,
      });
      assert.equal(c!.state, "blocked");
      assert.equal(s!.state, "scheduled");
      const leaseToken = token();
      const running = await t.adapter.claim({ queues: ["q"], limit: 2, now, leaseToken, leaseExpiresAt: now + LEASE_MS });
      assert.deepEqual(running.map((j) => j.id).sort(), [a!.id, b!.id].sort());
      // Session 1's repair reads the keys with blocked jobs (k: c) and is held; session 2 completes a and b, whose
      // rebalances promote c. Then the repair goes on, at a time when s is due: under k's lock c holds a slot and s is admitted.
      const held = hook.holdAfter("repair-keys");
      const repair = s1.repairKeys({ now: now + 2000, limit: 10 });
      await held.reached;
      for (const id of [a!.id, b!.id]) assert.ok(await settleOne(s2, { kind: "complete", id, leaseToken, now, concurrencyKey: "k" }));
      assert.equal((await t.adapter.get({ id: c!.id }))?.state, "ready");
      held.release();
      assert.deepEqual(await repair, [], "a key whose blocked job a completion had promoted is not reported as repaired");
      assert.equal((await t.adapter.get({ id: s!.id }))?.state, "ready", "the due scheduled job is admitted all the same");
    },
  },
];
