/**
 * A claim marks the jobs it took from a fair queue (`JobRecord.fairQueue`),
 * by which a worker's buffer lets a lone key's job go ahead of a flooding
 * key's (worker/local-buffer.ts `add`): every
 * claim path (one queue; beside a plain queue; a prioritized fair queue),
 * and never a plain queue's job.
 */
import assert from "node:assert/strict";
import type { JobRecord } from "../../../core/job.ts";
import type { KyselyConformanceCase } from "../harness.ts";
import { LEASE_MS, newJob, token } from "../../conformance/helpers.ts";

const marks = (jobs: readonly JobRecord[], queue: string) => jobs.filter((j) => j.queue === queue).map((j) => j.fairQueue);

export const fairMarkCases: KyselyConformanceCase[] = [
  {
    name: "fairness › a claim marks the jobs it took from a fair queue, prioritized or not, and no plain queue's",
    async run(t) {
      const now = t.clock.now();
      const fair = (key: string, priority = 0) => newJob({ queue: "q", runAt: now, priority, fairness: { key, weight: 1 } });
      await t.adapter.enqueue({ jobs: ["a", "a", "b", "b", "c"].map((k) => fair(k)), now });
      await t.adapter.enqueue({ jobs: [newJob({ queue: "other", runAt: now })], now });
      const claim = (queues: string[], limit: number) => t.adapter.claim({ queues, limit, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      assert.deepEqual(marks(await claim(["q"], 2), "q"), [true, true], "a claim of the fair queue alone");
      // Every ready job of both queues: the fair queue's other three and the plain queue's one.
      const beside = await claim(["other", "q"], 4);
      assert.deepEqual(marks(beside, "q"), [true, true, true], "beside a plain queue");
      assert.deepEqual(marks(beside, "other"), [undefined], "the plain queue's job");
      // A job of priority other than 0 makes the queue prioritized (its claims order each key's jobs by priority).
      await t.adapter.enqueue({ jobs: [fair("a", 5), fair("b")], now });
      assert.deepEqual(marks(await claim(["q"], 3), "q"), [true, true], "a prioritized fair queue's claim");
    },
  },
];
