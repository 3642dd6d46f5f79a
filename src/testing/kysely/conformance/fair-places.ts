/**
 * The places a claim of a fair queue reports (`JobRecord.fairPlace`), which
 * a worker's buffer orders a fair queue's prefetched jobs by
 * (worker/local-buffer.ts): a claim of a queue ordered by place alone gives
 * every placed job its place (its queue's first places, rising within each
 * key; the claim returns them in claim order, not place order);
 * a prioritized queue's claims (whose jobs take places other than their
 * stored tags) give none.
 */
import assert from "node:assert/strict";
import type { JobRecord } from "../../../core/job.ts";
import type { KyselyConformanceCase } from "../harness.ts";
import { LEASE_MS, newJob, token } from "../../conformance/helpers.ts";

/** Every job has a place, and each key's places rise with its jobs (ids). */
function assertPlaced(jobs: readonly JobRecord[]): void {
  const places = jobs.map((j) => j.fairPlace);
  assert.ok(places.every((p) => typeof p === "number"), `every job claimed from the fair queue has a place: ${JSON.stringify(places)}`);
  const last = new Map<string, number>();
  for (const j of [...jobs].sort((a, b) => a.id - b.id)) {
    assert.ok(j.fairPlace! > (last.get(j.fairKey ?? "") ?? -Infinity), `a key's places rise: ${JSON.stringify(places)}`);
    last.set(j.fairKey ?? "", j.fairPlace!);
  }
}

const places = (jobs: readonly JobRecord[]) => jobs.map((j) => j.fairPlace!);

export const fairPlaceCases: KyselyConformanceCase[] = [
  {
    name: "fairness › a claim of a fair queue gives each job its place, alone or beside another queue; a prioritized queue's claim gives none",
    async run(t) {
      const now = t.clock.now();
      const fair = (key: string, priority = 0) => newJob({ queue: "q", runAt: now, priority, fairness: { key, weight: 1 } });
      await t.adapter.enqueue({ jobs: ["a", "a", "a", "b", "b", "c"].map((k) => fair(k)), now });
      await t.adapter.enqueue({ jobs: [newJob({ queue: "other", runAt: now })], now });
      const claim = (queues: string[], limit: number) => t.adapter.claim({ queues, limit, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      const alone = await claim(["q"], 3);
      assert.equal(alone.length, 3);
      assertPlaced(alone);
      const beside = await claim(["other", "q"], 4);
      const fromQ = beside.filter((j) => j.queue === "q");
      assert.equal(fromQ.length, 3);
      assertPlaced(fromQ);
      assert.ok(Math.min(...places(fromQ)) >= Math.max(...places(alone)), "the second claim's places follow the first's");
      assert.equal(beside.find((j) => j.queue === "other")?.fairPlace, undefined, "a plain queue's job has no place");
      // A job of priority other than 0 makes the queue prioritized: its claims order each key's jobs by priority.
      await t.adapter.enqueue({ jobs: [fair("a", 5), fair("a"), fair("b")], now });
      const prioritized = await claim(["q"], 3);
      assert.equal(prioritized.length, 3);
      assert.deepEqual(prioritized.map((j) => j.fairPlace), [undefined, undefined, undefined]);
    },
  },
];
