/**
 * Two-session races whose interleaving the order of calls sets alone, with
 * no session held at a statement: R2, R3, R6, R8, R9, R13, R15 and R25 of the
 * race catalogue (docs/design.md). Each runs two adapters on one store and
 * returns the violation it observed, or null. These run on any adapter; the
 * races that hold a session at a statement, and each race's mutant (its
 * guard removed, to prove the scenario can fail), need the SQL store's
 * instrument seam and live in the kit's SQL entry.
 */
import assert from "node:assert/strict";
import type { DocketAdapter } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { Docket } from "../../client/docket.ts";
import type { CaseContext, ConformanceCase, TestStore } from "../harness.ts";
import { LEASE_MS, insert, newJob, sleep, token } from "./helpers.ts";
import { keyStates } from "./keys.ts";
import { extendLease, settleOne } from "../lease-writes.ts";
import { withStep } from "../../core/steps.ts";

/** Two adapters, each on its own connection to the case's store. */
export interface Sessions<S extends TestStore = TestStore> {
  t: CaseContext<S>;
  s1: DocketAdapter;
  s2: DocketAdapter;
}

/** A race: its scenario, which returns a description of the violation it observed (or null), and the guard it pins. */
export interface Race<X extends Sessions = Sessions> {
  id: string;
  name: string;
  guard: string;
  scenario(x: X): Promise<string | null>;
}

export const KEY = { concurrency: { key: "k", limit: 1, onConflict: "block" as const } };

/** Waits until `p` settles or `ms` passed (a statement blocked on a lock does not settle). */
export async function settle(p: Promise<unknown>, ms = 300): Promise<void> {
  await Promise.race([p.catch(() => undefined), sleep(ms)]);
}

export async function keyViolation(adapter: DocketAdapter, key: string, limit: number): Promise<string | null> {
  const s = await keyStates(adapter, key);
  const admitted = (s.ready?.length ?? 0) + (s.running?.length ?? 0);
  if (admitted > limit) return `key ${key}: ${admitted} admitted, limit ${limit} ${JSON.stringify(s)}`;
  if ((s.blocked?.length ?? 0) > 0 && admitted < limit) return `key ${key}: blocked job left while the key has room ${JSON.stringify(s)}`;
  return null;
}

export async function runningJob(t: CaseContext, extra: Partial<ReturnType<typeof newJob>> = {}): Promise<JobRecord> {
  await insert(t, { ...KEY, ...extra });
  const now = t.clock.now();
  const [job] = await t.adapter.claim({ queues: [extra.queue ?? "default"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
  assert.ok(job);
  return job;
}

export const fenced = (t: CaseContext, j: JobRecord) => ({ id: j.id, leaseToken: j.leaseToken!, now: t.clock.now() });

export const claimOf = (a: DocketAdapter, now: number) => a.claim({ queues: ["default"], limit: 5, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS, stage: false });

export const SEQUENCED_RACES: Race[] = [
  {
    id: "R2",
    name: "a live, heartbeating job keeps its slot: a sweeper that saw its lease expired cannot free it",
    guard: "the expiry re-checked in the reclaim's conditional write",
    async scenario({ t, s1, s2 }) {
      const job = await runningJob(t);
      await insert(t, KEY);
      const now = t.clock.advance(LEASE_MS + 1);
      const [seen] = await s1.listExpired({ now, limit: 10 });
      if (!(await extendLease(s2, { ...fenced(t, job), leaseExpiresAt: now + LEASE_MS }))) return "heartbeat refused";
      const reclaimed = await s1.expire({ id: seen!.id, leaseToken: seen!.leaseToken!, now, error: "expired", retryAt: now + 1000 });
      if (reclaimed) return `job ${job.id} reclaimed while its holder heartbeats: its slot went to another job`;
      return keyViolation(t.adapter, "k", 1);
    },
  },
  {
    id: "R3",
    name: "a job released at shutdown goes back through the controls: nothing is admitted beside it",
    guard: "a ready (released) job still holds its key's slot",
    async scenario({ t, s1, s2 }) {
      const job = await runningJob(t);
      await insert(t, KEY);
      await settleOne(s1, { kind: "release", ...fenced(t, job) });
      const now = t.clock.now();
      await s2.enqueue({ jobs: [newJob({ ...KEY, runAt: now })], now });
      return keyViolation(t.adapter, "k", 1);
    },
  },
  {
    id: "R6",
    name: "a job that gives up its slot (retry, or release then cancel) never keeps it: no permanent under-count",
    guard: "slots derived from live rows: only ready and running jobs hold one",
    async scenario({ t, s1, s2 }) {
      const job = await runningJob(t);
      await insert(t, KEY);
      const now = t.clock.now();
      await settleOne(s1, { kind: "fail", ...fenced(t, job), error: "x", retryAt: now + 60_000 });
      const afterRetry = await keyViolation(t.adapter, "k", 1);
      if (afterRetry) return afterRetry;
      const [next] = await s2.claim({ queues: ["default"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      await settleOne(s2, { kind: "release", ...fenced(t, next!) });
      await s1.cancel({ id: next!.id, now });
      return keyViolation(t.adapter, "k", 1);
    },
  },
  {
    id: "R8",
    name: "the running count excludes the job being claimed: a cap of 1 runs one",
    guard: "counting only jobs already running",
    async scenario({ t, s1 }) {
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 1 });
      await insert(t, { queue: "q" });
      const now = t.clock.now();
      const got = await s1.claim({ queues: ["q"], limit: 5, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      return got.length === 1 ? null : `cap 1 ran ${got.length}`;
    },
  },
  {
    id: "R9",
    name: "a claim turned away by a full cap leaves no trace on the job",
    guard: "the cap checked before anything is written",
    async scenario({ t, s1 }) {
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 1 });
      await runningJob(t, { queue: "q", concurrency: null });
      const waiting = await insert(t, { queue: "q" });
      const now = t.clock.advance(1000);
      const got = await s1.claim({ queues: ["q"], limit: 5, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      if (got.length > 0) return `claimed ${got.length} over a full cap`;
      const after = await t.adapter.get({ id: waiting.id });
      return JSON.stringify(after) === JSON.stringify(waiting) ? null : `the turned-away job changed: ${JSON.stringify(after)}`;
    },
  },
  {
    id: "R13",
    name: "a worker that crashes mid-run loses its job to the sweep after its lease: the job runs again and finishes, the crashed attempt cannot write",
    guard: "the sweep's list of expired leases",
    async scenario({ t, s1, s2 }) {
      const job = await insert(t);
      const [crashed] = await claimOf(s1, t.clock.now());
      if (crashed?.id !== job.id) return "setup: the first worker did not claim the job";
      // s1 is gone; time passes beyond its lease; s2's worker sweeps and claims.
      const now = t.clock.advance(LEASE_MS + 1);
      await new Docket({ adapter: s2, clock: t.clock, retry: { baseMs: 0, jitter: 0 } }).reclaimExpired();
      const [again] = await s2.claim({ queues: ["default"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      if (!again) return `job ${job.id} is stuck ${(await t.adapter.get({ id: job.id }))?.state} after its lease expired and a sweep ran`;
      if (await settleOne(s1, { kind: "complete", id: job.id, leaseToken: crashed.leaseToken!, now })) return "the crashed attempt still completed the job";
      const done = await settleOne(s2, { kind: "complete", id: job.id, leaseToken: again.leaseToken!, now });
      return done?.state === "succeeded" ? null : `the new attempt could not finish: ${done?.state}`;
    },
  },
  {
    id: "R15",
    name: "a retry is a row: after its worker dies, another worker runs it when it falls due",
    guard: "staging of due scheduled jobs",
    async scenario({ t, s1, s2 }) {
      const job = await insert(t);
      const [running] = await claimOf(s1, t.clock.now());
      if (!running) return "setup: no claim";
      const now = t.clock.now();
      await settleOne(s1, { kind: "fail", id: job.id, leaseToken: running.leaseToken!, now, error: "boom", retryAt: now + 1000 });
      await s1.close(); // the process that planned the retry is gone
      const later = t.clock.advance(1001);
      const [retried] = await s2.claim({ queues: ["default"], limit: 1, now: later, leaseToken: token(), leaseExpiresAt: later + LEASE_MS });
      return retried?.id === job.id && retried.attempt === 2 ? null : `the retry of job ${job.id} never ran (${(await t.adapter.get({ id: job.id }))?.state})`;
    },
  },
  {
    id: "R25",
    name: "a stale attempt cannot record a step: after its lease expired and another attempt claimed the job, its write is refused and the fresh attempt's steps stand",
    guard: "the lease token in the step's conditional write",
    async scenario({ t, s1, s2 }) {
      const job = await insert(t);
      const [stale] = await claimOf(s1, t.clock.now());
      if (stale?.id !== job.id) return "setup: the first worker did not claim the job";
      const first = withStep(null, "charge", '{"id":1}', t.clock.now());
      if (!(await s1.recordStep({ ...fenced(t, stale), steps: first }))) return "the lease holder could not record its step";
      const now = t.clock.advance(LEASE_MS + 1);
      await new Docket({ adapter: s2, clock: t.clock, retry: { baseMs: 0, jitter: 0 } }).reclaimExpired();
      const [fresh] = await s2.claim({ queues: ["default"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      if (!fresh) return "setup: the job was not claimed again after its lease expired";
      if (fresh.steps !== first) return `the fresh attempt does not see the step recorded before: ${fresh.steps}`;
      const fresher = withStep(first, "email", '"sent"', now);
      if (!(await s2.recordStep({ ...fenced(t, fresh), steps: fresher }))) return "the fresh attempt could not record its step";
      // The stale attempt, unaware, records its own next step over what it last saw.
      const overwrite = withStep(first, "email", '"sent twice"', now);
      const late = await s1.recordStep({ ...fenced(t, stale), steps: overwrite });
      const stored = (await t.adapter.get({ id: job.id }))?.steps;
      if (late !== null || stored !== fresher) return `the stale attempt recorded a step: stored ${stored}`;
      return null;
    },
  },
];

/** The case of each race: its scenario on two fresh sessions reports no violation. */
export function raceScenarioCases(races: readonly Race[]): ConformanceCase[] {
  return races.map((race) => ({
    name: `races › ${race.id}: ${race.name}`,
    async run(t: CaseContext) {
      const violation = await race.scenario({ t, s1: await t.connect(), s2: await t.connect() });
      assert.equal(violation, null, `${race.id} violated: ${violation}`);
    },
  }));
}

export const sequencedRaceCases: ConformanceCase[] = raceScenarioCases(SEQUENCED_RACES);
