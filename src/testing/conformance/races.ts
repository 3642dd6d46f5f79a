/**
 * Deterministic two-session tests for races R1–R9, R12 and R18 (DESIGN.md). Each holds
 * session 1 at its critical statement (StatementHook) while session 2 runs,
 * then checks the invariant. Each race also runs against a mutant, the
 * adapter with the guard removed through the instrument seam, and must
 * then report the violation: proof that the test can fail.
 */
import assert from "node:assert/strict";
import type { DocketAdapter } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { Docket } from "../../client/docket.ts";
import type { CaseContext, CaseNeed, ConformanceCase } from "../harness.ts";
import { StatementHook } from "../statement-hook.ts";
import { LEASE_MS, insert, jobInState, newJob, sleep, token } from "./helpers.ts";
import { keyStates } from "./keys.ts";
import type { InstrumentOptions } from "../../adapters/kysely/engine.ts";
import { engineWithoutTransactions, holdersCountedIn, idempotencyConflictsUnhandled, mutationById, replayUnlockedUnguarded, runningCountedInAnyState } from "../mutations.ts";
import { extendLease, settleOne } from "../lease-writes.ts";

/**
 * A guard removed, through the public seams only: the `instrument` option
 * (a query rewrite, or an engine whose units of work are not transactions),
 * and for R9 a wrapper around the public `claim`.
 */
export interface Mutant {
  instrument: InstrumentOptions;
  wrap?: (adapter: DocketAdapter) => void;
}
export interface Sessions {
  t: CaseContext;
  hook: StatementHook;
  s1: DocketAdapter;
  s2: DocketAdapter;
}
/** A race scenario: returns a description of the violation it observed, or null. */
export type Scenario = (x: Sessions) => Promise<string | null>;

/** A race: its scenario, the guard it pins, and that guard removed. */
export interface Race {
  id: string;
  name: string;
  /** What its scenario needs beyond the contract: races that hold a session at a statement need "statementHooks". */
  needs?: readonly CaseNeed[];
  scenario: Scenario;
  guard: string;
  mutant: Mutant;
}

/** Mutation: every "transaction" runs its statements in autocommit, so nothing it locks or writes is held together. */
const noTransaction: Mutant = { instrument: { wrapEngine: engineWithoutTransactions } };

/** Mutation: a key's admitted jobs are counted by `states` instead of ready + running. */
const holdersIn = (states: string[]): Mutant => ({ instrument: { plugins: [holdersCountedIn(states)] } });

const KEY = { concurrency: { key: "k", limit: 1, onConflict: "block" as const } };
const INSERT_JOB = /^insert into [`"]?\w*jobs[`"]? /i;
const REBALANCE = /^select [`"]max_holders[`"]/i;
/** A replay's UPDATE (`set attempt = …` first): after bulk replay locked its rows. */
const REPLAY_UPDATE = /^update [`"]?\w*jobs[`"]? set [`"]attempt[`"] = /i;
/** The claim's candidate select, which comes after the cap's running count (whole rows where the engine has no RETURNING). */
const CLAIM_CANDIDATES = /^select ([`"]id[`"], [`"]task[`"]|\* from [`"]?\w*jobs[`"]? where [`"]state[`"] in \(\S+\) and [`"]queue[`"] in)/i;

/** Waits until `p` settles or `ms` passed (a statement blocked on a lock does not settle). */
export async function settle(p: Promise<unknown>, ms = 300): Promise<void> {
  await Promise.race([p.catch(() => undefined), sleep(ms)]);
}

async function keyViolation(adapter: DocketAdapter, key: string, limit: number): Promise<string | null> {
  const s = await keyStates(adapter, key);
  const admitted = (s.ready?.length ?? 0) + (s.running?.length ?? 0);
  if (admitted > limit) return `key ${key}: ${admitted} admitted, limit ${limit} ${JSON.stringify(s)}`;
  if ((s.blocked?.length ?? 0) > 0 && admitted < limit) return `key ${key}: blocked job left while the key has room ${JSON.stringify(s)}`;
  return null;
}

async function runningJob(t: CaseContext, extra: Partial<ReturnType<typeof newJob>> = {}): Promise<JobRecord> {
  await insert(t, { ...KEY, ...extra });
  const now = t.clock.now();
  const [job] = await t.adapter.claim({ queues: [extra.queue ?? "default"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
  assert.ok(job);
  return job;
}

const fenced = (t: CaseContext, j: JobRecord) => ({ id: j.id, leaseToken: j.leaseToken!, now: t.clock.now() });

const RACES: Race[] = [
  {
    id: "R1",
    needs: ["statementHooks"],
    name: "an enqueue that decided to block, racing a finishing holder, is promoted: no lost wakeup",
    guard: "the key lock held across admission and release (one transaction each)",
    mutant: noTransaction,
    async scenario({ t, hook, s1, s2 }) {
      const holder = await runningJob(t);
      const held = hook.holdNext(INSERT_JOB);
      const now = t.clock.now();
      const enqueue = s1.enqueue({ jobs: [newJob({ ...KEY, runAt: now })], now });
      await held.reached;
      const finish = settleOne(s2, { kind: "complete", ...fenced(t, holder) });
      await settle(finish);
      held.release();
      await Promise.all([enqueue, finish]);
      return keyViolation(t.adapter, "k", 1);
    },
  },
  {
    id: "R2",
    name: "a live, heartbeating job keeps its slot: a sweeper that saw its lease expired cannot free it",
    guard: "the expiry re-checked in the reclaim's conditional write",
    mutant: { instrument: { plugins: mutationById("expire-ignores-expiry").plugins!() } },
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
    mutant: holdersIn(["running"]),
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
    id: "R4",
    needs: ["statementHooks"],
    name: "concurrent admissions to one key never push it past its limit",
    guard: "the key lock serializing admission checks",
    mutant: noTransaction,
    async scenario({ t, hook, s1, s2 }) {
      const held = hook.holdNext(INSERT_JOB);
      const now = t.clock.now();
      const first = s1.enqueue({ jobs: [newJob({ ...KEY, runAt: now })], now });
      await held.reached;
      const second = s2.enqueue({ jobs: [newJob({ ...KEY, runAt: now })], now });
      await settle(second);
      held.release();
      await Promise.all([first, second]);
      return keyViolation(t.adapter, "k", 1);
    },
  },
  {
    id: "R5",
    needs: ["statementHooks"],
    name: "a crash between finishing a job and promoting the next loses nothing",
    guard: "finish and promotion in one transaction",
    mutant: noTransaction,
    async scenario({ t, hook, s1 }) {
      const job = await runningJob(t);
      await insert(t, KEY);
      const held = hook.holdNext(REBALANCE);
      const finish = settleOne(s1, { kind: "complete", ...fenced(t, job) });
      await held.reached;
      held.crash();
      await finish.catch(() => undefined);
      // The crashed worker never comes back: its lease expires and a sweeper reclaims the job.
      t.clock.advance(LEASE_MS + 1);
      await new Docket({ adapter: t.adapter, clock: t.clock }).reclaimExpired();
      return keyViolation(t.adapter, "k", 1);
    },
  },
  {
    id: "R6",
    name: "a job that gives up its slot (retry, or release then cancel) never keeps it: no permanent under-count",
    guard: "slots derived from live rows: only ready and running jobs hold one",
    mutant: holdersIn(["ready", "running", "scheduled"]),
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
    id: "R7",
    needs: ["statementHooks"],
    name: "two claimers racing on a capped queue never run more than the cap",
    guard: "the cap check and the claim in one transaction under the queue's lock",
    mutant: noTransaction,
    async scenario({ t, hook, s1, s2 }) {
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 2 });
      for (let i = 0; i < 4; i++) await insert(t, { queue: "q" });
      const now = t.clock.now();
      const claim = (a: DocketAdapter) => a.claim({ queues: ["q"], limit: 2, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      const held = hook.holdNext(CLAIM_CANDIDATES);
      const first = claim(s1);
      await held.reached;
      const second = claim(s2);
      await settle(second);
      held.release();
      await Promise.all([first, second]);
      const running = (await t.adapter.list({ queue: "q", state: "running", limit: 100 })).length;
      return running > 2 ? `${running} running in queue q, cap 2` : running < 2 ? `only ${running} running while jobs wait, cap 2` : null;
    },
  },
  {
    id: "R8",
    name: "the running count excludes the job being claimed: a cap of 1 runs one",
    guard: "counting only jobs already running",
    mutant: { instrument: { plugins: [runningCountedInAnyState()] } },
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
    // The seed's bug: claim first, then hand back what the cap does not allow.
    mutant: {
      instrument: { plugins: mutationById("cap-unchecked").plugins!() },
      wrap(adapter) {
        const claim = adapter.claim.bind(adapter);
        adapter.claim = async (p) => {
          const got = await claim(p);
          for (const j of got) await settleOne(adapter, { kind: "release", id: j.id, leaseToken: j.leaseToken!, now: p.now });
          return [];
        };
      },
    },
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
    id: "R12",
    needs: ["statementHooks"],
    name: "two enqueues with one idempotency key, the second committing first: one job, both callers get it, neither fails",
    guard: "the insert that yields to a committed holder of the key (ON CONFLICT DO NOTHING, or a caught duplicate key)",
    // SQLite's single writer also serializes the two enqueues (the second then finds the holder before inserting): its transactions go too.
    mutant: { instrument: { plugins: idempotencyConflictsUnhandled.plugins(), wrapEngine: (e) => engineWithoutTransactions(idempotencyConflictsUnhandled.wrapEngine(e)) } },
    async scenario({ t, hook, s1, s2 }) {
      const now = t.clock.now();
      const job = () => newJob({ runAt: now, idempotencyKey: "order-7" });
      const held = hook.holdNext(INSERT_JOB);
      const first = s1.enqueue({ jobs: [job()], now });
      await held.reached;
      const second = s2.enqueue({ jobs: [job()], now });
      await settle(second);
      held.release();
      const [a, b] = await Promise.allSettled([first, second]);
      for (const r of [a, b]) if (r.status === "rejected") return `a caller failed: ${String((r.reason as Error)?.message ?? r.reason)}`;
      const [x] = (a as PromiseFulfilledResult<Awaited<typeof first>>).value;
      const [y] = (b as PromiseFulfilledResult<Awaited<typeof second>>).value;
      if (x!.id !== y!.id) return `the callers got jobs ${x!.id} and ${y!.id}`;
      if (Number(x!.created) + Number(y!.created) !== 1) return `created: ${x!.created} and ${y!.created}`;
      const stored = (await t.adapter.list({ limit: 10 })).length;
      return stored === 1 ? null : `${stored} jobs stored`;
    },
  },
  {
    id: "R18",
    needs: ["statementHooks"],
    name: "a bulk replay skips the dead jobs another replay holds: each job is replayed once, and no replay waits for another's rows",
    guard: "the bulk replay's row locks, its transaction and the replay guard (state IN dead)",
    mutant: { instrument: { plugins: [replayUnlockedUnguarded()], wrapEngine: engineWithoutTransactions } },
    async scenario({ t, hook, s1, s2 }) {
      const dead: number[] = [];
      for (let i = 0; i < 6; i++) dead.push((await jobInState(t, "dead")).id);
      const now = t.clock.advance(1);
      const held = hook.holdNext(REPLAY_UPDATE);
      const first = s1.replayDead({ diedBefore: now, limit: 3, now });
      await held.reached;
      let secondDone = false;
      const second = s2.replayDead({ diedBefore: now, limit: 10, now }).finally(() => void (secondDone = true));
      await settle(second);
      const waited = !secondDone;
      held.release();
      const [a, b] = await Promise.all([first, second]);
      const ids = [...a, ...b].map((j) => j.id);
      const twice = ids.filter((id, i) => ids.indexOf(id) !== i);
      if (twice.length > 0) return `jobs ${twice.join(", ")} replayed twice (first ${a.map((j) => j.id)}, second ${b.map((j) => j.id)})`;
      if (ids.length !== dead.length) return `${ids.length} of ${dead.length} dead jobs replayed`;
      // With row locks the second replay passes over the held rows; a single-writer engine runs the two one after the other.
      if (t.adapter.capabilities?.skipLocked === true && waited) return "the second replay waited for the rows the first one holds";
      return null;
    },
  },
];

async function sessions(t: CaseContext, mutant?: Mutant): Promise<Sessions> {
  const hook = new StatementHook();
  const m = mutant?.instrument ?? {};
  const s1 = await t.connect({ instrument: { ...m, wrapDialect: (d) => hook.wrap(m.wrapDialect ? m.wrapDialect(d) : d) } });
  const s2 = await t.connect({ instrument: m });
  mutant?.wrap?.(s1);
  mutant?.wrap?.(s2);
  return { t, hook, s1, s2 };
}

/** Two cases per race: the scenario holds, and it reports a violation once its guard is removed. */
export function raceCasesOf(races: readonly Race[]): ConformanceCase[] {
  return races.flatMap((race) => [
    {
      name: `races › ${race.id}: ${race.name}`,
      ...(race.needs ? { needs: race.needs } : {}),
      async run(t: CaseContext) {
        const violation = await race.scenario(await sessions(t));
        assert.equal(violation, null, `${race.id} violated: ${violation}`);
      },
    },
    {
      name: `races › ${race.id} is caught when ${race.guard} is removed`,
      // The guard is removed through kysely's instrument seam.
      needs: ["statementHooks"] as const,
      async run(t: CaseContext) {
        const x = await sessions(t, race.mutant);
        const violation = await race.scenario(x);
        assert.notEqual(violation, null, `${race.id}: the scenario did not detect the removed guard (${race.guard})`);
      },
    },
  ]);
}

export const raceCases: ConformanceCase[] = raceCasesOf(RACES);
