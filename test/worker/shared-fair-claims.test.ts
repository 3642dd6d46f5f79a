import { describe, expect, it } from "vitest";
import { Docket } from "../../src/index.ts";
import type { ClaimParams, DocketAdapter } from "../../src/core/adapter.ts";
import type { JobRecord } from "../../src/core/job.ts";
import { SHARED_FAIR_CLAIM_MAX, sharedFairClaim } from "../../src/worker/fair-claims.ts";
import { openTarget } from "../support/targets.ts";

const job = (queue: string, fairKey: string | null, fair = true) => ({ queue, fairKey, ...(fair ? { fairQueue: true } : {}) }) as JobRecord;

describe("claims while a fair queue is shared", () => {
  it("a claim shows a fair queue shared when one of its keys has one job and another several, in that queue", () => {
    expect(sharedFairClaim([job("q", "big"), job("q", "big"), job("q", "small")])).toBe(true);
    // The implicit key (no fairness key) counts as a key.
    expect(sharedFairClaim([job("q", null), job("q", "big"), job("q", "big")])).toBe(true);
    // A backlog alone: every key with several, or every key with one.
    expect(sharedFairClaim([job("q", "a"), job("q", "a"), job("q", "b"), job("q", "b")])).toBe(false);
    expect(sharedFairClaim([job("q", "a"), job("q", "b"), job("q", "c")])).toBe(false);
    // Not across queues, and not for plain queues' jobs.
    expect(sharedFairClaim([job("q", "a"), job("r", "b"), job("r", "b")])).toBe(false);
    expect(sharedFairClaim([job("q", "a", false), job("q", "b", false), job("q", "b", false)])).toBe(false);
    expect(sharedFairClaim([])).toBe(false);
  });

  it("after a claim that took a lone key's job beside a backlog's, the worker's next claims take at most SHARED_FAIR_CLAIM_MAX jobs", async () => {
    const target = (await openTarget("sqlite"))!;
    const store = await target.open();
    const inner = await store.connect();
    const claims: { limit: number; claimed: number }[] = [];
    const adapter = new Proxy(inner, {
      get(t, prop, receiver) {
        if (prop === "claim") {
          return async (params: ClaimParams) => {
            const claimed = await t.claim(params);
            claims.push({ limit: params.limit, claimed: claimed.length });
            return claimed;
          };
        }
        const value = Reflect.get(t, prop, receiver);
        return typeof value === "function" ? value.bind(t) : value;
      },
    }) as DocketAdapter;
    try {
      await adapter.migrate();
      const docket = new Docket({ adapter });
      await docket.enqueueMany(Array.from({ length: 3_000 }, () => ({ task: "t", payload: null, options: { queue: "fair", fairness: { key: "big" } } })));
      for (const key of ["a", "b", "c"]) await docket.enqueue("t", null, { queue: "fair", fairness: { key } });
      let ran = 0;
      const worker = docket.worker({ queues: ["fair"], concurrency: 1, prefetch: 1_000, pollMs: 60_000, logger: null, handlers: { t: async () => void ran++ } });
      await worker.start();
      while (ran < 3_003) await new Promise((r) => setTimeout(r, 10));
      await worker.stop();
      const first = claims.findIndex((c) => c.claimed > 0);
      // The first claim fills the buffer (room 1,001) and takes the three lone keys with the backlog's jobs.
      expect(claims[first]!.limit).toBe(1_001);
      const next = claims.slice(first + 1).filter((c) => c.claimed > 0);
      expect(next.length).toBeGreaterThan(0);
      expect(next.every((c) => c.limit <= SHARED_FAIR_CLAIM_MAX)).toBe(true);
    } finally {
      await adapter.close();
      await target.dispose();
    }
  });
});
