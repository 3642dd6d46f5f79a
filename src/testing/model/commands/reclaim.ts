import type { AsyncCommand } from "fast-check";
import { expectSame, expectSameList, expectSameStore, type ModelState, type RealSystem } from "./context.ts";

/** What a sweeper does with an expired lease: retry `retryInMs` later while attempts are left, else bury. */
export function expiryPlan(job: { attempt: number; maxAttempts: number }, now: number, retryInMs: number): number | null {
  return job.attempt >= job.maxAttempts ? null : now + retryInMs;
}

/** Reclaim expired leases: listExpired, then expire each (a failed attempt). */
export class ReclaimCommand implements AsyncCommand<ModelState, RealSystem> {
  constructor(readonly retryInMs: number) {}
  check(): boolean {
    return true;
  }
  async run(m: ModelState, r: RealSystem): Promise<void> {
    const expired = await r.adapter.listExpired({ now: m.now, limit: 100 });
    expectSameList("listExpired", m.store.listExpired({ now: m.now, limit: 100 }), expired);
    for (const job of expired) {
      const params = { id: job.id, leaseToken: job.leaseToken!, now: m.now, error: "lease expired", retryAt: expiryPlan(job, m.now, this.retryInMs) };
      const got = await r.adapter.expire(params);
      expectSame(`expire(#${job.id}, ${params.leaseToken})`, m.store.apply(job.id, { kind: "expire", ...params }), got);
    }
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    return `reclaimExpired(retry +${this.retryInMs}ms)`;
  }
}
