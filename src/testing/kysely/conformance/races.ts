/**
 * Deterministic two-session tests for races R1, R4, R5, R7, R12, R18, R20, R21, R22 and R23
 * (R1 and R5 also through the worker's batched outcome write, key known)
 * (docs/design.md). Each holds session 1 at its critical statement, found by
 * its label (StatementHook), while session 2 runs, then checks the
 * invariant. Each race, these and the sequenced ones of the portable kit
 * (conformance/races-sequenced.ts), also runs against a mutant, the adapter
 * with the guard removed through the instrument seam, and must then report
 * the violation: proof that the test can fail.
 */
import assert from "node:assert/strict";
import type { DocketAdapter } from "../../../core/adapter.ts";
import { Docket } from "../../../client/docket.ts";
import type { InstrumentOptions } from "../../../adapters/kysely/engine.ts";
import { LEASE_MS, insert, jobInState, newJob, token } from "../../conformance/helpers.ts";
import { KEY, SEQUENCED_RACES, fenced, keyViolation, runningJob, settle, type Race, type Sessions } from "../../conformance/races-sequenced.ts";
import type { KyselyCaseContext, KyselyConformanceCase, KyselyTestStore } from "../harness.ts";
import { StatementHook, type HeldStatement } from "../statement-hook.ts";
import { childlessFenceDropped, debounceUnguarded, engineWithoutTransactions, waitCountsUnlocked, fairOrderIgnored, handOffUnboundedByFreed, holdersCountedIn, idempotencyConflictsUnhandled, mutationById, replayUnlockedUnguarded, runningCountedInAnyState } from "../mutations.ts";
import { extendLease, settleOne } from "../../lease-writes.ts";

/**
 * A guard removed, through the public seams only: the `instrument` option
 * (a query rewrite, or an engine whose units of work are not transactions),
 * and for R9 a wrapper around the public `claim`.
 */
export interface Mutant {
  instrument: InstrumentOptions;
  wrap?: (adapter: DocketAdapter) => void;
}

/** Two sessions on a kysely store; session 1's statements pass through `hook`. */
export interface HeldSessions extends Sessions<KyselyTestStore> {
  hook: StatementHook;
}

/** A race that holds session 1 at a labelled statement, with its mutant. */
export interface HeldRace extends Race<HeldSessions> {
  mutant: Mutant;
  /** Whether the sessions have what the race needs (default: always); where not, both its cases pass without running it. */
  applies?: (s: HeldSessions) => boolean;
  /** Whether the mutant can break the race on these sessions (default: always); where not, only the mutant case passes without running it. */
  mutantApplies?: (s: HeldSessions) => boolean;
}

/** Whether the adapter's release reads the children's counts in a locking read a mutant can unlock (kysely/dependencies.ts `releaseInOne` with row locks: PostgreSQL's `FOR UPDATE OF j`). */
const lockedCountRead = (a: DocketAdapter) => {
  const c = a.capabilities as { returning?: boolean; rowLocks?: boolean } | undefined;
  return c?.returning === true && c?.rowLocks === true;
};

/** Mutation: every "transaction" runs its statements in autocommit, so nothing it locks or writes is held together. */
export const noTransaction: Mutant = { instrument: { wrapEngine: engineWithoutTransactions } };

/** Mutation: a key's admitted jobs are counted by `states` instead of ready + running. */
const holdersIn = (states: string[]): Mutant => ({ instrument: { plugins: [holdersCountedIn(states)] } });

/**
 * Two claims of queue q at one instant: session 1 claims `first` jobs and is
 * held at its claim UPDATE in the transaction that applies controls (its
 * candidates read and locked, nothing written: a one-statement claim it
 * tries first is let through), while session 2 claims `second`; then
 * session 1 goes on.
 */
async function claimsHeldAtUpdate({ t, hook, s1, s2 }: HeldSessions, first: number, second: number) {
  const now = t.clock.now();
  const claim = (a: DocketAdapter, limit: number) => a.claim({ queues: ["q"], limit, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
  const { held, started: one } = await holdControlledClaim(hook, "before", () => claim(s1, first));
  const two = claim(s2, second);
  await settle(two);
  held.release();
  return Promise.all([one, two]);
}

/**
 * Starts session 1's claim (`start`) and holds its claim UPDATE in the
 * transaction that applies controls, `before` it is sent or `after` it ran
 * (uncommitted); a one-statement claim tried first (`WITH …`) is let through.
 */
async function holdControlledClaim<T>(hook: StatementHook, when: "before" | "after", start: () => Promise<T>): Promise<{ held: HeldStatement; started: Promise<T> }> {
  const arm = () => (when === "before" ? hook.holdNext("claim") : hook.holdAfter("claim"));
  let held = arm();
  const started = start();
  for (;;) {
    const sql = await held.reached;
    if (!/^\s*with\b/i.test(sql)) return { held, started };
    const passed = held;
    held = arm();
    passed.release();
  }
}

const HELD_RACES: HeldRace[] = [
  {
    id: "R23",
    name: "two parents of one child finish at once on two sessions: the child is released exactly once, by whichever finishes last",
    guard: "the waiting children's counts read under their row locks (id order), in the transaction that records the parent's success",
    mutant: { instrument: { plugins: [waitCountsUnlocked()] } },
    // The release is one statement everywhere. Where it reads the counts in a locking CTE (PostgreSQL) the mutant
    // drops that lock; on SQLite (writers take turns) and MariaDB (UPDATE … JOIN: the write itself reads each child's
    // newest row under its lock) there is no separate read to unlock.
    mutantApplies: ({ s1 }) => lockedCountRead(s1),
    // Parents A and B run; child C waits for both (count 2). Session 1 completes A and is held after its release
    // statement (count 1 written, uncommitted); session 2 completes B. With the guard session 2 waits for session 1's
    // commit and counts from 1: C is released. Without it both count from 2 and both write 1: C waits forever.
    async scenario({ t, hook, s1, s2 }) {
      const now = t.clock.now();
      const [a, b] = await t.adapter.enqueue({ jobs: [newJob({ queue: "p", runAt: now }), newJob({ queue: "p", runAt: now })], now });
      const [child] = await t.adapter.enqueue({ jobs: [newJob({ runAt: now, after: { ids: [a!.id, b!.id], refs: [] } })], now });
      const running = await t.adapter.claim({ queues: ["p"], limit: 2, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      const done = (s: DocketAdapter, id: number) => settleOne(s, { kind: "complete", id, leaseToken: running[0]!.leaseToken!, now, concurrencyKey: null });
      const held = hook.holdAfter("unwait");
      const one = done(s1, a!.id);
      await held.reached;
      const two = done(s2, b!.id);
      await settle(two);
      held.release();
      const [r1, r2] = await Promise.allSettled([one, two]);
      for (const r of [r1, r2]) if (r.status === "rejected") return `a completion failed: ${String((r.reason as Error)?.message ?? r.reason)}`;
      const c = await t.adapter.get({ id: child!.id });
      return c?.state === "scheduled" ? null : `both parents succeeded but child ${child!.id} is ${c?.state}: never released`;
    },
  },
  {
    id: "R23 (enqueue)",
    name: "a child enqueued while its parent finishes: released when the parent's success commits after the child's edges, counted done when before",
    guard: "the enqueue locks the parent's row and marks it has_children; a write that ends a job without settling children requires has_children = 0, so it misses and the settling path runs",
    mutant: { instrument: { plugins: [childlessFenceDropped()] } },
    // Parent A runs. Session 1 enqueues child C after A and is held after locking A and storing C (waiting), before
    // its edges; session 2 completes A through the batched fast path. With the fence, session 2 waits for A's row
    // (or the writer's lock) and then misses A (now marked), and the settling path releases C. Without it, session 2
    // ends A without looking for children: C waits forever.
    async scenario({ t, hook, s1, s2 }) {
      const now = t.clock.now();
      await t.adapter.enqueue({ jobs: [newJob({ queue: "p", runAt: now })], now });
      const [parent] = await t.adapter.claim({ queues: ["p"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      const held = hook.holdNext("enqueue-deps");
      const one = s1.enqueue({ jobs: [newJob({ runAt: now, after: { ids: [parent!.id], refs: [] } })], now });
      await held.reached;
      const two = settleOne(s2, { kind: "complete", id: parent!.id, leaseToken: parent!.leaseToken!, now, concurrencyKey: null });
      await settle(two);
      held.release();
      const [r1, r2] = await Promise.allSettled([one, two]);
      for (const r of [r1, r2]) if (r.status === "rejected") return `a caller failed: ${String((r.reason as Error)?.message ?? r.reason)}`;
      const [child] = (r1 as PromiseFulfilledResult<Awaited<typeof one>>).value;
      const c = await t.adapter.get({ id: child!.id });
      const p = await t.adapter.get({ id: parent!.id });
      if (p?.state !== "succeeded") return `the parent is ${p?.state}, not succeeded`;
      return c?.state === "scheduled" || c?.state === "ready" ? null : `the parent succeeded but child ${child!.id} is ${c?.state}: never released`;
    },
  },
  {
    id: "R1",
    name: "an enqueue that decided to block, racing a finishing holder, is promoted: no lost wakeup",
    guard: "the key lock held across admission and release (one transaction each)",
    mutant: noTransaction,
    async scenario({ t, hook, s1, s2 }) {
      const holder = await runningJob(t);
      const held = hook.holdNext("enqueue");
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
    id: "R1 (outcome batch)",
    name: "an enqueue that decided to block, racing a holder finished by the worker's batched outcome write (key known), is promoted",
    guard: "the key lock held across admission and the batched release (one transaction each)",
    mutant: noTransaction,
    async scenario({ t, hook, s1, s2 }) {
      const holder = await runningJob(t);
      const held = hook.holdNext("enqueue");
      const now = t.clock.now();
      const enqueue = s1.enqueue({ jobs: [newJob({ ...KEY, runAt: now })], now });
      await held.reached;
      const finish = settleOne(s2, { kind: "complete", ...fenced(t, holder), concurrencyKey: "k" });
      await settle(finish);
      held.release();
      await Promise.all([enqueue, finish]);
      return keyViolation(t.adapter, "k", 1);
    },
  },
  {
    id: "R4",
    name: "concurrent admissions to one key never push it past its limit",
    guard: "the key lock serializing admission checks",
    mutant: noTransaction,
    async scenario({ t, hook, s1, s2 }) {
      const held = hook.holdNext("enqueue");
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
    name: "a crash between finishing a job and promoting the next loses nothing",
    guard: "finish and promotion in one transaction",
    mutant: noTransaction,
    async scenario({ t, hook, s1 }) {
      const job = await runningJob(t);
      await insert(t, KEY);
      const held = hook.holdNext("rebalance");
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
    id: "R5 (outcome batch)",
    name: "a crash between the worker's batched outcome write (key known) and the bulk promotion loses nothing",
    guard: "the batched outcomes and their keys' promotion in one transaction",
    mutant: noTransaction,
    async scenario({ t, hook, s1 }) {
      const job = await runningJob(t);
      await insert(t, KEY);
      const held = hook.holdNext("key-holders");
      const finish = settleOne(s1, { kind: "complete", ...fenced(t, job), concurrencyKey: "k" });
      await held.reached;
      held.crash();
      await finish.catch(() => undefined);
      t.clock.advance(LEASE_MS + 1);
      await new Docket({ adapter: t.adapter, clock: t.clock }).reclaimExpired();
      return keyViolation(t.adapter, "k", 1);
    },
  },
  {
    id: "R7",
    name: "two claimers racing on a capped queue never run more than the cap",
    guard: "the cap check and the claim in one transaction under the queue's lock",
    mutant: noTransaction,
    // Session 1 holds its claim's UPDATE, having counted the queue's running jobs (none) and chosen A and B. A
    // job C ahead of them in claim order becomes ready (staged by session 2's claim, due only at its time), and
    // session 2 claims. Under the queue's lock session 2 counts session 1's jobs and takes none; without it,
    // it counts none and takes C and A, and session 1 then writes B: three running.
    async scenario({ t, hook, s1, s2 }) {
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 2 });
      const now = t.clock.now();
      const claim = (a: DocketAdapter, at: number) => a.claim({ queues: ["q"], limit: 2, now: at, leaseToken: token(), leaseExpiresAt: at + LEASE_MS });
      // Session 1 met the cap: its next claim goes straight to the transaction that applies caps (one UPDATE labelled claim).
      assert.deepEqual(await claim(s1, now), []);
      for (let i = 0; i < 2; i++) await insert(t, { queue: "q" });
      await insert(t, { queue: "q", state: "scheduled", runAt: now + 10, priority: -1 });
      const held = hook.holdNext("claim");
      const first = claim(s1, now);
      await held.reached;
      const second = claim(s2, now + 10);
      await settle(second);
      held.release();
      await Promise.all([first, second]);
      const running = (await t.adapter.list({ queue: "q", state: "running", limit: 100 })).length;
      return running > 2 ? `${running} running in queue q, cap 2` : running < 2 ? `only ${running} running while jobs wait, cap 2` : null;
    },
  },
  {
    id: "R7 (hand-off)",
    name: "a completion's hand-off racing a claim on a capped queue never runs more than the cap (where the adapter hands off; elsewhere nothing to race)",
    guard: "a hand-off takes at most the slots its completions freed",
    mutant: { instrument: { plugins: [handOffUnboundedByFreed()] } },
    applies: ({ s2 }) => s2.settleAndHandOff !== undefined,
    // Session 1 holds its claim's UPDATE, having counted A running and chosen B and C (cap 3). Session 2 completes A,
    // handing its slot off: it waits for the queue's row, and its count (from before session 1 committed) still sees
    // only A running. Bounded by the one slot A freed it takes D; bounded only by that count, D and E: four running.
    async scenario({ t, hook, s1, s2 }) {
      await t.adapter.setQueueControl({ queue: "q", maxRunning: 3 });
      const now = t.clock.now();
      const claim = (a: DocketAdapter, limit: number) => a.claim({ queues: ["q"], limit, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      await insert(t, { queue: "q" });
      const [a] = await claim(s2, 1);
      assert.ok(a, "session 2 claimed A");
      // Session 1 met the cap: its next claim goes straight to the transaction that applies caps (one UPDATE labelled claim).
      assert.deepEqual(await claim(s1, 5), []);
      for (let i = 0; i < 4; i++) await insert(t, { queue: "q" });
      const held = hook.holdNext("claim");
      const first = claim(s1, 5);
      await held.reached;
      const item = { kind: "complete" as const, id: a.id, leaseToken: a.leaseToken!, now, concurrencyKey: null };
      const second = s2.settleAndHandOff!({ items: [item], handOff: { queues: ["q"], limit: 5, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS } });
      await settle(second);
      held.release();
      await Promise.all([first, second]);
      const running = (await t.adapter.list({ queue: "q", state: "running", limit: 100 })).length;
      return running > 3 ? `${running} running in queue q, cap 3` : running < 3 ? `only ${running} running while jobs wait, cap 3` : null;
    },
  },
  ...(["queue", "key"] as const).map(
    (scope): HeldRace => ({
      id: `R20 (${scope} limit)`,
      name: `two claimers racing for the last start of a ${scope === "queue" ? "queue's rate limit" : "rate key's limit"} never both take it`,
      guard: "the limit's log read and rewritten in the claim's transaction, under the limit's row lock",
      mutant: noTransaction,
      // Limit 1 per hour; job A (task a) and job B (task b) share it. Session 1 claims task a and is held just before
      // it logs its start (it has read the log: room 1, chosen A). Session 2 claims task b: under the limit's lock it
      // waits for session 1, then reads its start and takes nothing; without it, it reads the empty log and takes B.
      async scenario({ t, s1, s2, hook }) {
        const limit = { limit: 1, periodMs: 3_600_000 };
        if (scope === "queue") await t.adapter.setQueueControl({ queue: "q", rateLimit: limit });
        const rateLimit = scope === "key" ? { key: "api", ...limit } : null;
        for (const task of ["a", "b"]) await insert(t, { queue: "q", task, rateLimit });
        const now = t.clock.now();
        const claim = (a: DocketAdapter, task: string) => a.claim({ queues: ["q"], tasks: [task], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
        const held = hook.holdNext("rate-log");
        const first = claim(s1, "a");
        await held.reached;
        const second = claim(s2, "b");
        await settle(second);
        held.release();
        const started = (await Promise.all([first, second])).flat();
        return started.length > 1 ? `${started.length} jobs started [${started.map((j) => j.task).join(", ")}] in one window, limit 1` : started.length === 0 ? "no job started" : null;
      },
    }),
  ),
  {
    id: "R12",
    name: "two enqueues with one idempotency key, the second committing first: one job, both callers get it, neither fails",
    guard: "the insert that yields to a committed holder of the key (ON CONFLICT DO NOTHING, or a caught duplicate key)",
    // SQLite's single writer also serializes the two enqueues (the second then finds the holder before inserting): its transactions go too.
    mutant: { instrument: { plugins: idempotencyConflictsUnhandled.plugins(), wrapEngine: (e) => engineWithoutTransactions(idempotencyConflictsUnhandled.wrapEngine(e)) } },
    async scenario({ t, hook, s1, s2 }) {
      const now = t.clock.now();
      const job = () => newJob({ runAt: now, idempotencyKey: "order-7" });
      const held = hook.holdNext("enqueue");
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
    name: "a bulk replay skips the dead jobs another replay holds: each job is replayed once, and no replay waits for another's rows",
    guard: "the bulk replay's row locks, its transaction and the replay guard (state IN dead)",
    mutant: { instrument: { plugins: [replayUnlockedUnguarded()], wrapEngine: engineWithoutTransactions } },
    async scenario({ t, hook, s1, s2 }) {
      const dead: number[] = [];
      for (let i = 0; i < 6; i++) dead.push((await jobInState(t, "dead")).id);
      const now = t.clock.advance(1);
      const held = hook.holdNext("replay");
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
  {
    id: "R22",
    name: "an enqueue merging into a debounced job while a worker claims it: the merge lands before the claim or stores the key's next job (never lost, never two pending)",
    guard: "the pending row's lock (the merge's find) and the merge's state guard (TRANSITIONS.debounce)",
    // SQLite's single writer also serializes the merge and the claim: its transactions go too.
    mutant: { instrument: { plugins: [debounceUnguarded()], wrapEngine: engineWithoutTransactions } },
    // Session 1 has found the key's pending job J (due) and is held at its merge write; session 2 claims. With the
    // row lock, session 2 passes J over (or waits for it) and the merge moves J into the future: nothing claimed,
    // J pending with the last payload. Without the lock and the guard, session 2 runs J with the old payload and
    // the merge then writes into the running job: the burst's last payload never runs.
    // The jobs carry a rate key too: a debounced job with another control merges in the transaction (mergeOrInsert) on
    // every engine; alone, on an engine with an upsert, it takes one statement (the race's next case).
    async scenario({ t, hook, s1, s2 }) {
      const debounce = { key: "burst", delayMs: 1_000, maxWaitMs: null };
      const rateLimit = { key: "r22", limit: 1_000, periodMs: 60_000 };
      const job = (payload: string, at: number) => newJob({ state: "scheduled", runAt: at + 1_000, payload, debounce, rateLimit });
      const t0 = t.clock.now();
      await t.adapter.enqueue({ jobs: [job('{"n":1}', t0)], now: t0 });
      const now = t.clock.advance(1_000);
      const held = hook.holdNext("debounce");
      const merge = s1.enqueue({ jobs: [job('{"n":2}', now)], now });
      await held.reached;
      const claim = s2.claim({ queues: ["default"], limit: 10, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      await settle(claim);
      held.release();
      const [m, c] = await Promise.allSettled([merge, claim]);
      // Every enqueue of the key merges or stores the next job: failing is losing the burst too (here a schema check may refuse the write).
      for (const r of [m, c]) if (r.status === "rejected") return `a caller failed: ${String((r.reason as Error)?.message ?? r.reason)}`;
      const [merged] = (m as PromiseFulfilledResult<Awaited<typeof merge>>).value;
      const claimed = (c as PromiseFulfilledResult<Awaited<typeof claim>>).value;
      const took = claimed.find((c) => c.id === merged!.id);
      if (took) return `the merge wrote into job ${took.id}, which session 2 claimed with payload ${took.payload}: the burst's last payload never runs`;
      const pending = (await t.adapter.list({ limit: 100 })).filter((j) => j.debounceKey === "burst" && ["scheduled", "ready", "blocked"].includes(j.state));
      if (pending.length > 1) return `${pending.length} pending jobs for one debounce key: ${pending.map((j) => `#${j.id} ${j.state}`).join(", ")}`;
      if (claimed.some((c) => c.payload === '{"n":2}')) return null;
      const [next] = pending;
      if (!next || next.id !== merged!.id || next.payload !== '{"n":2}' || next.attempt !== 0) {
        return `the last payload is neither claimed nor pending: claimed ${JSON.stringify(claimed.map((c) => [c.id, c.payload]))}, pending ${JSON.stringify(pending.map((j) => [j.id, j.payload, j.attempt]))}, merge returned #${merged!.id}`;
      }
      return null;
    },
  },
  {
    id: "R22",
    name: "(one statement) an enqueue upserting into a debounced job that a claim holds: it waits for the claim, then stores the key's next job; the claimed job keeps its payload",
    guard:
      "the unique index of pending debounce keys (its state predicate: a claimed job leaves it) and the upsert's wait and re-check of the conflicting row " +
      "(debounce.ts upsertDebounced: ON CONFLICT; upsertOnDuplicate: ON DUPLICATE KEY UPDATE on MariaDB's debounce_slot)",
    // The guard is the database's own: no rewrite of the statement removes it and leaves a statement PostgreSQL accepts
    // (an ON CONFLICT target must match the partial index; MariaDB's is a generated column's). The case checks the outcome on the engines with the upsert.
    mutant: noTransaction,
    mutantApplies: () => false,
    applies: ({ s1 }) => ["postgres", "mysql"].includes((s1 as { name?: string }).name ?? ""),
    // A cap sends the claim through the transaction that applies controls: session 1 is held after its claim UPDATE,
    // the pending job J running and uncommitted. Session 2's debounced enqueue conflicts with J on the pending index and
    // waits; once session 1 commits, J is no longer pending and the enqueue inserts the key's next job.
    async scenario({ t, hook, s1, s2 }) {
      await t.adapter.setQueueControl({ queue: "default", maxRunning: 100 });
      const debounce = { key: "burst", delayMs: 1_000, maxWaitMs: null };
      const job = (payload: string, at: number) => newJob({ state: "scheduled", runAt: at + 1_000, payload, debounce });
      const t0 = t.clock.now();
      const [pending] = await t.adapter.enqueue({ jobs: [job('{"n":1}', t0)], now: t0 });
      const now = t.clock.advance(1_000);
      const { held, started: claim } = await holdControlledClaim(hook, "after", () => s1.claim({ queues: ["default"], limit: 10, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS }));
      const merge = s2.enqueue({ jobs: [job('{"n":2}', now)], now });
      await settle(merge);
      held.release();
      const [c, m] = await Promise.allSettled([claim, merge]);
      for (const r of [c, m]) if (r.status === "rejected") return `a caller failed: ${String((r.reason as Error)?.message ?? r.reason)}`;
      const claimed = (c as PromiseFulfilledResult<Awaited<typeof claim>>).value;
      const [merged] = (m as PromiseFulfilledResult<Awaited<typeof merge>>).value;
      const j = claimed.find((x) => x.id === pending!.id);
      if (!j) return `session 1 did not claim the pending job #${pending!.id} (claimed ${claimed.map((x) => x.id)})`;
      const stored = await t.adapter.get({ id: j.id });
      if (stored?.payload !== '{"n":1}') return `the enqueue wrote into job #${j.id}, which session 1 claimed: its payload is ${stored?.payload}`;
      if (merged!.id === j.id || !merged!.created) return `the enqueue returned the claimed job #${j.id} (created ${merged!.created}): the burst's last payload never runs`;
      const pendingNow = (await t.adapter.list({ limit: 100 })).filter((x) => x.debounceKey === "burst" && ["scheduled", "ready", "blocked"].includes(x.state));
      if (pendingNow.length !== 1 || pendingNow[0]!.id !== merged!.id || pendingNow[0]!.payload !== '{"n":2}') {
        return `pending jobs for the key: ${JSON.stringify(pendingNow.map((x) => [x.id, x.state, x.payload]))}; the enqueue returned #${merged!.id}`;
      }
      return null;
    },
  },
  {
    id: "R21",
    name: "two claimers of a fair queue take the first places: the second passes over the jobs the first holds and serves the next keys, not the flooding key's later jobs",
    guard: "claims take a fair queue's jobs in tag order (`ORDER BY fair_tag, id`), `FOR UPDATE SKIP LOCKED` where the engine can",
    mutant: { instrument: { plugins: [fairOrderIgnored()] } },
    // SQLite's single writer runs the two claims one after the other: nothing to race.
    applies: ({ s1 }) => s1.capabilities?.skipLocked === true,
    // Key flood enqueues 20 jobs, then keys x and y one each: places x, flood 1, y, flood 2, … Session 1 claims two
    // (x and flood's first) and is held before its UPDATE, holding them. Session 2 claims two: in tag order it
    // passes over them and takes y and flood's second; by id it takes flood's later jobs while y waits.
    async scenario({ t, hook, s1, s2 }) {
      const now = t.clock.now();
      const fair = (key: string) => newJob({ queue: "q", fairness: { key, weight: 1 }, runAt: now });
      await t.adapter.enqueue({ jobs: Array.from({ length: 20 }, () => fair("flood")), now });
      await t.adapter.enqueue({ jobs: [fair("x")], now });
      await t.adapter.enqueue({ jobs: [fair("y")], now });
      const [a, b] = await claimsHeldAtUpdate({ t, hook, s1, s2 }, 2, 2);
      const keys = (jobs: typeof a) => JSON.stringify(jobs.map((j) => j.fairKey));
      const ids = [...a, ...b].map((j) => j.id);
      if (new Set(ids).size !== ids.length) return `a job was claimed twice (${JSON.stringify(ids)})`;
      if (a.length !== 2 || b.length !== 2) return `the sessions took ${a.length} and ${b.length} jobs of 2 each (${keys(a)}, ${keys(b)})`;
      const flood = [...a, ...b].filter((j) => j.fairKey === "flood").length;
      return flood > 2 ? `the flooding key took ${flood} of the 4 slots while ${["x", "y"].filter((k) => ![...a, ...b].some((j) => j.fairKey === k)).join(" and ")} waited (${keys(a)}, ${keys(b)})` : null;
    },
  },
  {
    id: "R21 (enqueue)",
    name: "two enqueues of one fairness key at one instant get successive places: the key never gets two jobs in one round",
    guard: "the key row's last tag advanced and read back in the enqueue's transaction, under the row's lock",
    mutant: noTransaction,
    // Where the advance and its read are one statement (RETURNING: PostgreSQL, SQLite) there is nothing between them to race.
    applies: ({ s1 }) => (s1.capabilities as { returning?: boolean } | undefined)?.returning === false,
    // Key flood holds 20 jobs. Session 1 enqueues a job of key x and is held after advancing x's row, before reading it
    // back; session 2 enqueues another job of x. Under the lock session 2 waits and takes the place after session 1's;
    // without the transaction it advances the row in between, and session 1 reads back session 2's place.
    async scenario({ t, hook, s1, s2 }) {
      const now = t.clock.now();
      const fair = (key: string) => newJob({ queue: "q", fairness: { key, weight: 1 }, runAt: now });
      await t.adapter.enqueue({ jobs: Array.from({ length: 20 }, () => fair("flood")), now });
      const held = hook.holdNext("fair-keys");
      const one = s1.enqueue({ jobs: [fair("x")], now });
      await held.reached;
      const two = s2.enqueue({ jobs: [fair("x")], now });
      await settle(two);
      held.release();
      await Promise.all([one, two]);
      // In fair order x's two jobs have places in two rounds, flood's second job between them; with one place, none.
      const order: string[] = [];
      while (order.filter((k) => k === "x").length < 2 && order.length < 22) {
        const [job] = await t.adapter.claim({ queues: ["q"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
        order.push(job?.fairKey ?? "-");
      }
      const between = order.slice(order.indexOf("x") + 1, order.lastIndexOf("x")).length;
      return between === 0 ? `key x's two jobs were served one after the other (${JSON.stringify(order)}): its two enqueues got one place` : null;
    },
  },
];

/** The mutants of the portable kit's sequenced races, by race id. */
const SEQUENCED_MUTANTS: Record<string, Mutant> = {
  R2: { instrument: { plugins: mutationById("expire-ignores-expiry").plugins!() } },
  R3: holdersIn(["running"]),
  R6: holdersIn(["ready", "running", "scheduled"]),
  R8: { instrument: { plugins: [runningCountedInAnyState()] } },
  R25: { instrument: { plugins: mutationById("lease-token-unchecked").plugins!() } },
  // The cap checked only after the claim: claim first, then hand back what the cap does not allow.
  R9: {
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
};

/** Two sessions for the case `name`: session 1 behind a statement hook; both with the mutant's instrumentation when given. */
export async function sessions(t: KyselyCaseContext, name: string, mutant?: Mutant): Promise<HeldSessions> {
  const hook = new StatementHook({ name });
  const m = mutant?.instrument ?? {};
  const s1 = await t.connect({ instrument: { ...m, wrapDialect: (d) => hook.wrap(m.wrapDialect ? m.wrapDialect(d) : d) } });
  const s2 = await t.connect({ instrument: m });
  mutant?.wrap?.(s1);
  mutant?.wrap?.(s2);
  return { t, hook, s1, s2 };
}

/** The case that runs `race` against `mutant` and expects it to report a violation. */
function mutantCase(race: Race<HeldSessions> | Race, mutant: Mutant): KyselyConformanceCase {
  const name = `races › ${race.id} is caught when ${race.guard} is removed`;
  return {
    name,
    async run(t) {
      const s = await sessions(t, name, mutant);
      if ((race as HeldRace).applies?.(s) === false || (race as HeldRace).mutantApplies?.(s) === false) return;
      const violation = await race.scenario(s);
      assert.notEqual(violation, null, `${race.id}: the scenario did not detect the removed guard (${race.guard})`);
    },
  };
}

/** Two cases per race: the scenario holds, and it reports a violation once its guard is removed. */
export function raceCasesOf(races: readonly HeldRace[]): KyselyConformanceCase[] {
  return races.flatMap((race) => {
    const name = `races › ${race.id}: ${race.name}`;
    const holds: KyselyConformanceCase = {
      name,
      async run(t) {
        const s = await sessions(t, name);
        if (race.applies && !race.applies(s)) return;
        const violation = await race.scenario(s);
        assert.equal(violation, null, `${race.id} violated: ${violation}`);
      },
    };
    return [holds, mutantCase(race, race.mutant)];
  });
}

/** The mutant case of each race of `races` that `mutants` names (by race id); a mutant that names no race is an error. */
export function mutantCasesOf(races: readonly Race[], mutants: Record<string, Mutant>): KyselyConformanceCase[] {
  const unknown = Object.keys(mutants).filter((id) => !races.some((race) => race.id === id));
  if (unknown.length > 0) throw new Error(`mutants for races that do not exist: ${unknown.join(", ")}`);
  return races.filter((race) => race.id in mutants).map((race) => mutantCase(race, mutants[race.id]!));
}

export const raceCases: KyselyConformanceCase[] = [...raceCasesOf(HELD_RACES), ...mutantCasesOf(SEQUENCED_RACES, SEQUENCED_MUTANTS)];
