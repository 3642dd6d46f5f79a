import { describe, expect, it } from "vitest";
import { Docket } from "../../src/index.ts";
import { memoryAdapter } from "../../src/memory.ts";
import type { ClaimParams, DocketAdapter, ExtendLeasesParams } from "../../src/core/adapter.ts";

/**
 * A handler starts only while its attempt holds at least half its lease
 * (Executor.startBuffered). A claim that returns late (its transaction
 * stalled behind a cluster that paused, as Galera does while a node
 * rejoins) hands back attempts whose leases, computed when the claim
 * began, are short or already gone: they are renewed first, and one whose
 * lease a sweep took meanwhile never starts here.
 */
const LEASE_MS = 400;

function heldClaims(inner: DocketAdapter, extendDelayMs = 0) {
  let holdNext = false;
  let entered!: () => void;
  const claimEntered = new Promise<void>((r) => (entered = r));
  let openGate!: () => void;
  const gate = new Promise<void>((r) => (openGate = r));
  const renewals: number[][] = [];
  const adapter = new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === "settleAndHandOff") return undefined;
      if (prop === "claim") {
        return async (params: ClaimParams) => {
          const claimed = await target.claim(params);
          if (holdNext && claimed.length > 0) {
            holdNext = false;
            entered();
            await gate;
          }
          return claimed;
        };
      }
      if (prop === "extendLeases") {
        return async (params: ExtendLeasesParams) => {
          if (extendDelayMs > 0) await new Promise((r) => setTimeout(r, extendDelayMs));
          const kept = await target.extendLeases(params);
          renewals.push(kept.map((k) => k.id));
          return kept;
        };
      }
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  }) as DocketAdapter;
  return { adapter, hold: () => (holdNext = true), claimEntered, release: () => openGate(), renewals };
}

/**
 * One job whose claim is held for `holdMs` after it returned (then `meanwhile`
 * runs), with heartbeats `extendDelayMs` slow; resolves once the job
 * succeeded, with each handler start's attempt and whether a renewal had
 * kept the job's lease before it.
 */
async function lateClaim(options: { holdMs: number; extendDelayMs?: number; meanwhile?: (docket: Docket) => Promise<void> }) {
  const held = heldClaims(memoryAdapter(), options.extendDelayMs);
  const docket = new Docket({ adapter: held.adapter });
  await docket.migrate();
  const starts: { attempt: number; renewedBefore: boolean }[] = [];
  const worker = docket.worker({
    pollMs: 20,
    leaseMs: LEASE_MS,
    heartbeatMs: LEASE_MS - 1,
    reclaimMs: 3_600_000,
    logger: null,
    handlers: { t: async (_p, ctx) => void starts.push({ attempt: ctx.job.attempt, renewedBefore: held.renewals.some((ids) => ids.includes(ctx.job.id)) }) },
  });
  held.hold();
  const job = await docket.enqueue("t", null);
  await worker.start();
  try {
    await held.claimEntered;
    await new Promise((r) => setTimeout(r, options.holdMs));
    await options.meanwhile?.(docket);
    held.release();
    expect((await docket.waitFor(job.id, { timeoutMs: 5_000, pollMs: 5 })).state).toBe("succeeded");
    return starts;
  } finally {
    await worker.stop();
    await docket.close();
  }
}

describe("a claim that returns late", () => {
  it("past half its lease: the lease is renewed before the handler starts, and the job runs once", async () => {
    const starts = await lateClaim({ holdMs: LEASE_MS * 0.7 });
    expect(starts).toHaveLength(1);
    expect(starts[0]!.renewedBefore, "the handler started on a lease with less than half left, unrenewed").toBe(true);
  });

  it("past half its lease, with heartbeats that themselves take over half the lease: the handler starts on what the renewal left (no livelock)", async () => {
    expect(await lateClaim({ holdMs: LEASE_MS * 0.7, extendDelayMs: LEASE_MS * 0.6 })).toHaveLength(1);
  });

  it("past its whole lease, swept meanwhile: the stale attempt never starts; the job runs once, in its next attempt", async () => {
    const starts = await lateClaim({
      holdMs: LEASE_MS + 50,
      // Another process's sweep finds the lease expired: the job is ready again, its first attempt spent.
      meanwhile: async (docket) => expect((await docket.reclaimExpired()).retried).toBe(1),
    });
    expect(starts.map((s) => s.attempt), "attempt 1 started on a lease a sweep had taken").toEqual([2]);
  });
});
