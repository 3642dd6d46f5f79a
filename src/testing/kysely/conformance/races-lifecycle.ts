/**
 * Two-session tests for the lifecycle races R10, R11, R16, R17 and R19
 * (docs/design.md; R12, R14 and R18 have theirs beside their features, R13
 * and R15 are sequenced, in the portable kit). Same machinery as races.ts:
 * session 1 held at its critical statement, found by its label, while
 * session 2 runs, then the invariant checked; each race (R13 and R15 too)
 * also runs with its guard removed through the instrument seam and must
 * then report the violation. Where SQLite's single writer would serialize
 * the two sessions anyway, the mutant removes the engine's transactions too.
 */
import type { DocketAdapter } from "../../../core/adapter.ts";
import { toJob } from "../../../core/job.ts";
import { LEASE_MS, insert, jobInState } from "../../conformance/helpers.ts";
import { SEQUENCED_RACES, claimOf, settle } from "../../conformance/races-sequenced.ts";
import type { KyselyConformanceCase } from "../harness.ts";
import { engineWithoutTransactions, expireUnfenced, expiredLeasesUnlisted, mutationById, retryUnfenced, stagingAdmitsNothing } from "../mutations.ts";
import { mutantCasesOf, raceCasesOf, type HeldRace, type Mutant } from "./races.ts";
import { settleOne } from "../../lease-writes.ts";

/** The claim without its state guard and without its row locks. */
const claimUnguarded: Mutant = {
  instrument: { plugins: [...mutationById("claim-any-state").plugins!(), ...mutationById("claim-unlocked-no-recheck").plugins!()], wrapEngine: engineWithoutTransactions },
};

const LIFECYCLE_RACES: HeldRace[] = [
  {
    id: "R10",
    name: "two workers claiming at once never both take one job",
    guard: "the claim's row lock and its state guard",
    mutant: claimUnguarded,
    async scenario({ t, hook, s1, s2 }) {
      const job = await insert(t);
      const now = t.clock.now();
      const held = hook.holdNext("claim");
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
    name: "a cancel racing a claim: one wins, and a cancelled job is never claimed afterwards",
    guard: "the claim's state guard (and row lock)",
    mutant: claimUnguarded,
    async scenario({ t, hook, s1, s2 }) {
      const job = await insert(t);
      const now = t.clock.now();
      const held = hook.holdNext("claim");
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
    id: "R16",
    name: "a retry write racing a cancel does not overwrite the cancel",
    guard: "the retry's state and lease fence",
    mutant: { instrument: { plugins: [retryUnfenced()], wrapEngine: engineWithoutTransactions } },
    async scenario({ t, hook, s1, s2 }) {
      const job = await insert(t);
      const [running] = await claimOf(t.adapter, t.clock.now());
      const now = t.clock.now();
      const held = hook.holdNext("retry");
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
    name: "two concurrent replays of one dead job: exactly one replays it",
    guard: "the replay's state guard (dead only)",
    mutant: { instrument: { plugins: mutationById("replay-dead-any-state").plugins!(), wrapEngine: engineWithoutTransactions } },
    async scenario({ t, hook, s1, s2 }) {
      const dead = await jobInState(t, "dead");
      const now = t.clock.now();
      const held = hook.holdNext("replay");
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
    name: "two sweepers expiring one lease: exactly one moves the job",
    guard: "the expire's state, token and expiry fence",
    mutant: { instrument: { plugins: [expireUnfenced()], wrapEngine: engineWithoutTransactions } },
    async scenario({ t, hook, s1, s2 }) {
      const job = await insert(t);
      const [running] = await claimOf(t.adapter, t.clock.now());
      const now = t.clock.advance(LEASE_MS + 1);
      const expire = (a: DocketAdapter) => a.expire({ id: job.id, leaseToken: running!.leaseToken!, now, error: "lease expired", retryAt: now + 1000 });
      const held = hook.holdNext("expireRetry");
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

/** The mutants of the sequenced lifecycle races, by race id. */
const SEQUENCED_MUTANTS: Record<string, Mutant> = {
  R13: { instrument: { plugins: [expiredLeasesUnlisted()] } },
  R15: { instrument: { plugins: [stagingAdmitsNothing()] } },
};

export const lifecycleRaceCases: KyselyConformanceCase[] = [...raceCasesOf(LIFECYCLE_RACES), ...mutantCasesOf(SEQUENCED_RACES, SEQUENCED_MUTANTS)];
