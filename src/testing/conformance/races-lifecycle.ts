/**
 * Two-session tests for the lifecycle races R10, R11, R13, R15, R16, R17 and
 * R19 (DESIGN.md; R12, R14 and R18 have theirs beside their features). Same
 * machinery as races.ts: session 1 held at its critical statement while
 * session 2 runs, then the invariant checked; each race also runs with its
 * guard removed through the instrument seam and must then report the
 * violation. Where SQLite's single writer would serialize the two sessions
 * anyway, the mutant removes the engine's transactions too.
 */
import { Docket } from "../../client/docket.ts";
import type { DocketAdapter } from "../../core/adapter.ts";
import { toJob } from "../../core/job.ts";
import type { ConformanceCase } from "../harness.ts";
import { engineWithoutTransactions, expireUnfenced, expiredLeasesUnlisted, mutationById, retryUnfenced, stagingAdmitsNothing } from "../mutations.ts";
import { LEASE_MS, insert, jobInState, token } from "./helpers.ts";
import { raceCasesOf, settle, type Mutant, type Race } from "./races.ts";
import { settleOne } from "../lease-writes.ts";

/** A claim's write: PostgreSQL's and SQLite's one statement, or MariaDB's UPDATE after its candidate SELECT. */
const CLAIM_WRITE = /^(with [`"]ctl_q[`"]|update [`"]?\w*jobs[`"]? set [`"]state[`"] = \S+, [`"]attempt[`"] = attempt \+ 1)/i;
/** A failure's write (a holder's retry, a sweeper's expire): it sets the lease columns first. */
const FAILURE_WRITE = /^update [`"]?\w*jobs[`"]? set [`"]lease_token[`"]/i;
/** A replay's write. */
const REPLAY_WRITE = /^update [`"]?\w*jobs[`"]? set [`"]attempt[`"] = /i;

/** The claim without its state guard and without its row locks. */
const claimUnguarded: Mutant = {
  instrument: { plugins: [...mutationById("claim-any-state").plugins!(), ...mutationById("claim-unlocked-no-recheck").plugins!()], wrapEngine: engineWithoutTransactions },
};
const claimOf = (a: DocketAdapter, now: number) => a.claim({ queues: ["default"], limit: 5, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS, stage: false });

const LIFECYCLE_RACES: Race[] = [
  {
    id: "R10",
    needs: ["statementHooks"],
    name: "two workers claiming at once never both take one job",
    guard: "the claim's row lock and its state guard",
    mutant: claimUnguarded,
    async scenario({ t, hook, s1, s2 }) {
      const job = await insert(t);
      const now = t.clock.now();
      const held = hook.holdNext(CLAIM_WRITE);
      const first = claimOf(s1, now);
      await held.reached;
      const second = claimOf(s2, now);
      await settle(second);
      held.release();
      const [a, b] = await Promise.all([first, second]);
      const takers = [...a, ...b].filter((j) => j.id === job.id).length;
      const after = await t.adapter.get({ id: job.id });
      if (takers > 1 || (after?.attempt ?? 0) > 1) return `job ${job.id} claimed ${takers} times (attempt ${after?.attempt})`;
      return takers === 1 ? null : `job ${job.id} was claimed by neither`;
    },
  },
  {
    id: "R11",
    needs: ["statementHooks"],
    name: "a cancel racing a claim: one wins, and a cancelled job is never claimed afterwards",
    guard: "the claim's state guard (and row lock)",
    mutant: claimUnguarded,
    async scenario({ t, hook, s1, s2 }) {
      const job = await insert(t);
      const now = t.clock.now();
      const held = hook.holdNext(CLAIM_WRITE);
      const claiming = claimOf(s1, now);
      await held.reached;
      const cancelling = s2.cancel({ id: job.id, now });
      await settle(cancelling);
      held.release();
      const [, cancelled] = await Promise.all([claiming, cancelling]);
      const after = await t.adapter.get({ id: job.id });
      if (cancelled && after?.state !== "cancelled") return `job ${job.id} was cancelled, then claimed: it is ${after?.state}`;
      return null;
    },
  },
  {
    id: "R13",
    name: "a worker that crashes mid-run loses its job to the sweep after its lease: the job runs again and finishes, the crashed attempt cannot write",
    guard: "the sweep's list of expired leases",
    mutant: { instrument: { plugins: [expiredLeasesUnlisted()] } },
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
    mutant: { instrument: { plugins: [stagingAdmitsNothing()] } },
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
    id: "R16",
    needs: ["statementHooks"],
    name: "a retry write racing a cancel does not overwrite the cancel",
    guard: "the retry's state and lease fence",
    mutant: { instrument: { plugins: [retryUnfenced()], wrapEngine: engineWithoutTransactions } },
    async scenario({ t, hook, s1, s2 }) {
      const job = await insert(t);
      const [running] = await claimOf(t.adapter, t.clock.now());
      const now = t.clock.now();
      const held = hook.holdNext(FAILURE_WRITE);
      const retrying = settleOne(s1, { kind: "fail", id: job.id, leaseToken: running!.leaseToken!, now, error: "boom", retryAt: now + 1000 });
      await held.reached;
      const cancelling = s2.cancel({ id: job.id, now });
      await settle(cancelling);
      held.release();
      // Either order is legal (a retry then a cancel of the scheduled job, or the cancel and a retry that matches nothing);
      // a retry written over the cancel is not.
      const [, cancelled] = await Promise.all([retrying, cancelling]);
      const after = await t.adapter.get({ id: job.id });
      return cancelled && after?.state !== "cancelled" ? `the cancel of job ${job.id} was overwritten: it is ${after?.state}` : null;
    },
  },
  {
    id: "R17",
    needs: ["statementHooks"],
    name: "two concurrent replays of one dead job: exactly one replays it",
    guard: "the replay's state guard (dead only)",
    mutant: { instrument: { plugins: mutationById("replay-dead-any-state").plugins!(), wrapEngine: engineWithoutTransactions } },
    async scenario({ t, hook, s1, s2 }) {
      const dead = await jobInState(t, "dead");
      const now = t.clock.now();
      const held = hook.holdNext(REPLAY_WRITE);
      const first = s1.replay({ id: dead.id, now });
      await held.reached;
      const second = s2.replay({ id: dead.id, now });
      await settle(second);
      held.release();
      const won = (await Promise.all([first, second])).filter((r) => r !== null).length;
      return won === 1 ? null : `${won} replays of job ${dead.id} succeeded`;
    },
  },
  {
    id: "R19",
    needs: ["statementHooks"],
    name: "two sweepers expiring one lease: exactly one moves the job",
    guard: "the expire's state, token and expiry fence",
    mutant: { instrument: { plugins: [expireUnfenced()], wrapEngine: engineWithoutTransactions } },
    async scenario({ t, hook, s1, s2 }) {
      const job = await insert(t);
      const [running] = await claimOf(t.adapter, t.clock.now());
      const now = t.clock.advance(LEASE_MS + 1);
      const expire = (a: DocketAdapter) => a.expire({ id: job.id, leaseToken: running!.leaseToken!, now, error: "lease expired", retryAt: now + 1000 });
      const held = hook.holdNext(FAILURE_WRITE);
      const first = expire(s1);
      await held.reached;
      const second = expire(s2);
      await settle(second);
      held.release();
      const moved = (await Promise.all([first, second])).filter((r) => r !== null).length;
      if (moved !== 1) return `${moved} sweepers moved job ${job.id}`;
      const history = toJob((await t.adapter.get({ id: job.id }))!).errors.length;
      return history === 1 ? null : `job ${job.id} failed once but its error history has ${history} entries`;
    },
  },
];

export const lifecycleRaceCases: ConformanceCase[] = raceCasesOf(LIFECYCLE_RACES);
