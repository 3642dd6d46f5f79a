/**
 * One lease holder's writes on one job, through the calls docket's worker
 * makes: an outcome is a `settle` of one item, a heartbeat an
 * `extendLeases` of one lease. For cases and scenarios that write for a
 * single job; they assume nothing beyond the DocketAdapter contract.
 */
import type { DocketAdapter, LeaseKey, SettleItem, SettledJob } from "../core/adapter.ts";
import type { JobRecord } from "../core/job.ts";

/** `settle` with this one item: what the outcome wrote, or null when the lease was not held (nothing written). */
export async function settleOne(adapter: DocketAdapter, item: SettleItem): Promise<SettledJob | null> {
  const [settled] = await adapter.settle({ items: [item] });
  return settled ?? null;
}

/** `settleOne`, then the whole job as stored after it; null when the lease was not held. */
export async function settleAndRead(adapter: DocketAdapter, item: SettleItem): Promise<JobRecord | null> {
  return (await settleOne(adapter, item)) === null ? null : adapter.get({ id: item.id });
}

/** A heartbeat: `extendLeases` of this one lease. True when it was extended, false when the lease is not held (nothing written). */
export async function extendLease(adapter: DocketAdapter, params: LeaseKey & { now: number; leaseExpiresAt: number }): Promise<boolean> {
  const kept = await adapter.extendLeases({ items: [{ id: params.id, leaseToken: params.leaseToken }], now: params.now, leaseExpiresAt: params.leaseExpiresAt });
  return kept.some((k) => k.id === params.id);
}
