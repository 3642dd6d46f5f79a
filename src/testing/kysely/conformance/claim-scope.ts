/**
 * What a claim locks: a claim of one job across several queues holds that
 * job, not every ready job of its queues. On MariaDB a locking read ordered
 * across queues (a sort) locked every row it read before its LIMIT applied,
 * so a second claimer meanwhile found nothing to claim; the candidates are
 * now read per queue (kysely/controls-claim.ts `readCandidates`).
 */
import assert from "node:assert/strict";
import type { KyselyConformanceCase } from "../harness.ts";
import { LEASE_MS, newJob, token } from "../../conformance/helpers.ts";
import { sessions } from "./races.ts";

export const claimScopeCases: KyselyConformanceCase[] = [
  {
    name: "claims › a claim of one job across two queues leaves their other ready jobs to a concurrent claimer",
    async run(t) {
      const { hook, s1, s2 } = await sessions(t, "claim scope");
      const now = t.clock.now();
      await t.adapter.enqueue({ jobs: ["a", "a", "b", "b"].map((queue, i) => newJob({ queue, runAt: now, priority: i })), now });
      const claim = (s: typeof s1) => s.claim({ queues: ["a", "b"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      // Where a claim is one statement (PostgreSQL, SQLite) it commits before the next begins; elsewhere session 1
      // is held after its candidates' locking read, its transaction open, while session 2 claims.
      const viaCandidates = (s1.capabilities as { claimStatement?: boolean } | undefined)?.claimStatement !== true;
      const held = viaCandidates ? hook.holdAfter("claim-candidates") : null;
      const one = claim(s1);
      if (held) await held.reached;
      const two = await claim(s2);
      held?.release();
      const first = await one;
      assert.equal(first.length, 1, "session 1 claims one job");
      assert.equal(two.length, 1, "session 2, claiming while session 1 holds its job, claims another ready job of the same queues");
      assert.notEqual(two[0]!.id, first[0]!.id);
    },
  },
];
