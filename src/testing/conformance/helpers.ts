import assert from "node:assert/strict";
import type { DocketAdapter, NewJob } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import type { JobState } from "../../core/states.ts";
import type { CaseContext } from "../harness.ts";
import { settleAndRead } from "../lease-writes.ts";

export const LEASE_MS = 30_000;

export function newJob(overrides: Partial<NewJob> = {}): NewJob {
  return {
    task: "t",
    queue: "default",
    payload: "{}",
    state: "ready",
    priority: 0,
    runAt: 0,
    maxAttempts: 3,
    backoff: null,
    concurrency: null,
    ...overrides,
  };
}

export async function insert(t: CaseContext, overrides: Partial<NewJob> = {}, adapter: DocketAdapter = t.adapter): Promise<JobRecord> {
  const now = t.clock.now();
  const [job] = await adapter.enqueue({ jobs: [newJob({ runAt: now, ...overrides })], now });
  const { created: _created, ...record } = job!;
  return record;
}

let tokens = 0;
export function token(): string {
  return `tok-${Date.now().toString(36)}-${(tokens++).toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Claims up to `limit` jobs of `queues` under a fresh lease, as worker `worker` when given. */
export async function claim(t: CaseContext, limit = 1, adapter: DocketAdapter = t.adapter, queues = ["default"], worker?: string): Promise<JobRecord[]> {
  const now = t.clock.now();
  return adapter.claim({ queues, limit, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS, ...(worker === undefined ? {} : { worker }) });
}

export async function claimOne(t: CaseContext): Promise<JobRecord> {
  const [job] = await claim(t, 1);
  assert.ok(job, "expected to claim a job");
  return job;
}

/** The queue of the parent `jobInState` gives a waiting job: nothing else is enqueued to it. */
export const PARENT_QUEUE = "conformance-parents";

/** Completes every parent of job `id` (claimed from PARENT_QUEUE) at `now`; how many it completed. */
export async function completeParents(t: CaseContext, id: number, now: number): Promise<number> {
  const { parents } = await t.adapter.dependencies({ id });
  let done = 0;
  for (const p of await claim(t, 100, t.adapter, [PARENT_QUEUE])) {
    if (!parents.includes(p.id)) continue;
    await t.adapter.settle({ items: [{ kind: "complete", id: p.id, leaseToken: p.leaseToken!, now, concurrencyKey: p.concurrencyKey }] });
    done++;
  }
  return done;
}

/** A job brought to `state` through the contract's own operations (blocked: by an admin write). */
export async function jobInState(t: CaseContext, state: JobState): Promise<JobRecord> {
  const now = t.clock.now();
  switch (state) {
    case "waiting": {
      const parent = await insert(t, { queue: PARENT_QUEUE });
      const child = await insert(t, { after: { ids: [parent.id], refs: [] } });
      assert.equal(child.state, "waiting");
      return child;
    }
    case "ready":
      return insert(t);
    case "scheduled":
      return insert(t, { state: "scheduled", runAt: now + 60_000 });
    case "blocked": {
      const concurrency = { key: `k${token()}`, limit: 1, onConflict: "block" as const };
      await insert(t, { concurrency });
      const job = await insert(t, { concurrency });
      assert.equal(job.state, "blocked");
      return job;
    }
    case "running": {
      await insert(t);
      return claimOne(t);
    }
    case "succeeded": {
      const running = await jobInState(t, "running");
      return (await settleAndRead(t.adapter, { kind: "complete", id: running.id, leaseToken: running.leaseToken!, now }))!;
    }
    case "dead": {
      const running = await jobInState(t, "running");
      return (await settleAndRead(t.adapter, { kind: "fail", id: running.id, leaseToken: running.leaseToken!, now, error: "x", retryAt: null }))!;
    }
    case "cancelled": {
      const job = await insert(t);
      return (await t.adapter.cancel({ id: job.id, now }))!;
    }
  }
}

export async function stateOf(t: CaseContext, id: number): Promise<JobState | undefined> {
  return (await t.adapter.get({ id }))?.state;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls `check` every 10 ms until it returns true, or fails after `ms`. */
export async function eventually(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await check()) return;
    await sleep(10);
  }
  assert.fail(`timed out after ${ms} ms waiting for: ${what}`);
}
