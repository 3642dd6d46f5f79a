import fc from "fast-check";
import type { DocketAdapter, NewJob } from "../core/adapter.ts";
import { MemoryAdapter } from "../adapters/memory/index.ts";
import { settleOne } from "./lease-writes.ts";
import type { ScheduleEnv } from "./schedule/concurrent.ts";
import { T0 } from "./schedule/concurrent.ts";

/**
 * Fair sharing, model-based: random sequences of enqueues with fairness
 * keys, weights, priorities and delays (and jobs without a key), claims,
 * completions, failures that retry, and clock steps, run on a SQL adapter
 * and on the memory adapter side by side. The memory adapter is the
 * reference: it applies core/fairness.ts's rule to plain maps, with no
 * caches. After every step, each claim must take the same jobs, and every
 * job must be in the same state, on both. Before every step the SQL store
 * forgets what it remembered (its fair queues and clocks, read at most
 * every FAIR_QUEUES_TTL_MS / FAIR_CLOCK_TTL_MS of wall time in use), so
 * both read the queue's clock as of that step.
 */
export type FairOp =
  | { kind: "enqueue"; jobs: { key: string | null; weight: number; priority: number; delayMs: number }[] }
  | { kind: "claim"; limit: number }
  | { kind: "finish"; pick: number; retryInMs: number | null }
  | { kind: "advance"; ms: number };

const QUEUE = "f";
const KEYS = ["k1", "k2", "k3"];

export function fairOpArbitrary(): fc.Arbitrary<FairOp> {
  const job = fc.record({
    key: fc.option(fc.constantFrom(...KEYS), { freq: 4 }),
    weight: fc.constantFrom(1, 1, 2, 3),
    priority: fc.constantFrom(0, 0, 0, 1),
    delayMs: fc.constantFrom(0, 0, 0, 50),
  });
  return fc.oneof(
    { weight: 4, arbitrary: fc.record({ kind: fc.constant("enqueue" as const), jobs: fc.array(job, { minLength: 1, maxLength: 5 }) }) },
    { weight: 4, arbitrary: fc.record({ kind: fc.constant("claim" as const), limit: fc.integer({ min: 1, max: 4 }) }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant("finish" as const), pick: fc.nat(), retryInMs: fc.constantFrom(null, null, 0, 30) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("advance" as const), ms: fc.constantFrom(10, 60) }) },
  );
}

/** One side of the comparison: an adapter, and its job ids by the reference's. */
interface Side {
  adapter: DocketAdapter;
  ids: Map<number, number>;
}

/** Runs `ops` on `real` (emptied) and a fresh memory adapter; throws at the first difference. */
export async function runFairOps(real: DocketAdapter, ops: readonly FairOp[]): Promise<void> {
  const ref = new MemoryAdapter();
  await ref.migrate();
  const sql: Side = { adapter: real, ids: new Map() };
  let now = T0;
  let token = 0;
  const leases = new Map<number, string>();
  const forget = () => (real as { forgetRemembered?: () => void }).forgetRemembered?.();
  const fail = (step: number, what: string) => {
    throw new Error(`step ${step + 1} (${JSON.stringify(ops[step])}): ${what}`);
  };
  for (const [step, op] of ops.entries()) {
    forget();
    if (op.kind === "advance") {
      now += op.ms;
    } else if (op.kind === "enqueue") {
      const jobs: NewJob[] = op.jobs.map((j) => ({
        task: "t",
        queue: QUEUE,
        payload: "{}",
        state: j.delayMs > 0 ? "scheduled" : "ready",
        priority: j.priority,
        runAt: now + j.delayMs,
        maxAttempts: 5,
        backoff: null,
        concurrency: null,
        idempotencyKey: null,
        fairness: j.key === null ? null : { key: j.key, weight: j.weight },
      }));
      const want = await ref.enqueue({ jobs, now });
      const got = await real.enqueue({ jobs, now });
      if (want.length !== got.length) fail(step, `enqueued ${got.length} jobs, the reference ${want.length}`);
      want.forEach((w, i) => sql.ids.set(w.id, got[i]!.id));
    } else if (op.kind === "claim") {
      const params = (leaseToken: string) => ({ queues: [QUEUE], limit: op.limit, now, leaseToken, leaseExpiresAt: now + 60_000 });
      const leaseToken = `l${++token}`;
      const want = await ref.claim(params(leaseToken));
      const got = await real.claim(params(leaseToken));
      const wantIds = want.map((j) => sql.ids.get(j.id)!).sort((a, b) => a - b);
      const gotIds = got.map((j) => j.id).sort((a, b) => a - b);
      if (JSON.stringify(wantIds) !== JSON.stringify(gotIds)) fail(step, `claimed ${JSON.stringify(gotIds)}, the reference ${JSON.stringify(wantIds)}`);
      for (const j of want) leases.set(j.id, leaseToken);
    } else {
      const running = [...leases.keys()].sort((a, b) => a - b);
      if (running.length === 0) continue;
      const id = running[op.pick % running.length]!;
      const leaseToken = leases.get(id)!;
      leases.delete(id);
      const item = (jobId: number) =>
        op.retryInMs === null
          ? { kind: "complete" as const, id: jobId, leaseToken, now, result: null }
          : { kind: "fail" as const, id: jobId, leaseToken, now, error: "boom", retryAt: now + op.retryInMs };
      const want = await settleOne(ref, item(id));
      const got = await settleOne(real, item(sql.ids.get(id)!));
      if ((want === null) !== (got === null)) fail(step, `settled: ${got !== null}, the reference: ${want !== null}`);
    }
    for (const [refId, realId] of sql.ids) {
      const [w, g] = await Promise.all([ref.get({ id: refId }), real.get({ id: realId })]);
      if (w?.state !== g?.state) fail(step, `job ${realId} (reference ${refId}) is ${g?.state}, the reference's is ${w?.state}`);
    }
  }
}

/** The property: for random operation lists, `runFairOps` finds no difference. */
export async function checkFairness(env: ScheduleEnv, o: { numRuns: number; seed?: number; path?: string }): Promise<fc.RunDetails<unknown>> {
  const real = env.workers[0]!.adapter;
  const property = fc.asyncProperty(fc.array(fairOpArbitrary(), { minLength: 1, maxLength: 30 }), async (ops) => {
    await env.reset();
    await runFairOps(real, ops);
  });
  const params = { numRuns: o.numRuns, ...(o.seed === undefined ? {} : { seed: o.seed }), ...(o.path === undefined ? {} : { path: o.path }) };
  return fc.check(property, params) as Promise<fc.RunDetails<unknown>>;
}
