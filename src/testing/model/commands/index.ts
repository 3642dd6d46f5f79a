import fc from "fast-check";
import { AdvanceClockCommand } from "./advance-clock.ts";
import { CancelCommand } from "./cancel.ts";
import { ClaimCommand } from "./claim.ts";
import { ControlCommand, type ControlChange } from "./controls.ts";
import { CompleteCommand } from "./complete.ts";
import { EnqueueCommand } from "./enqueue.ts";
import { FailCommand } from "./fail.ts";
import { HeartbeatCommand } from "./heartbeat.ts";
import { ReclaimCommand } from "./reclaim.ts";
import { RecordStepCommand } from "./record-step.ts";
import { ReleaseCommand } from "./release.ts";
import { ReplayCommand } from "./replay.ts";
import { RunNowCommand } from "./run-now.ts";
import { ReplayDeadCommand } from "./replay-dead.ts";
import type { ModelState, RealSystem } from "./context.ts";

export { ModelState, type RealSystem, expectSame, expectSameList, expectSameStore } from "./context.ts";
export {
  AdvanceClockCommand,
  CancelCommand,
  ClaimCommand,
  CompleteCommand,
  ControlCommand,
  EnqueueCommand,
  FailCommand,
  HeartbeatCommand,
  ReclaimCommand,
  RecordStepCommand,
  ReleaseCommand,
  ReplayCommand,
  RunNowCommand,
  ReplayDeadCommand,
};
export { expiryPlan } from "./reclaim.ts";

/** Lease length the command arbitraries use; the clock advances in steps around it. */
export const MODEL_LEASE_MS = 1_000;

const QUEUES = ["a", "b"];
const TASKS = ["t", "u"];
/** Concurrency keys: a few, so that keyed jobs collide; limits 1–2, block or discard. */
const KEYS = ["k1", "k2"];
const concurrency = fc.option(
  fc.record({
    key: fc.constantFrom(...KEYS),
    limit: fc.integer({ min: 1, max: 2 }),
    onConflict: fc.constantFrom<"block" | "discard">("block", "block", "discard"),
  }),
  { freq: 2, nil: null },
);
/**
 * Debounce keys: two, so that bursts merge; delays around the clock's steps, so that a pending job is
 * merged into while scheduled, while staged ready, after it ran (the next burst) and past its maxWaitMs.
 */
const debounce = fc.oneof(
  { weight: 3, arbitrary: fc.constant(null) },
  {
    weight: 2,
    arbitrary: fc.record({ key: fc.constantFrom("d1", "d2"), delayMs: fc.constantFrom(500, 1_500), maxWaitMs: fc.constantFrom<number | null>(null, 2_000) }),
  },
);
const cap = fc.constantFrom<number | null>(null, 1, 1, 2);
/** Rate limits: one period per limit (a changed period would make the adapters' pruned logs and the model's full history disagree). */
const RATE_PERIOD_MS = 1_000;
const rate = fc.constantFrom<{ limit: number; periodMs: number } | null>(null, { limit: 1, periodMs: RATE_PERIOD_MS }, { limit: 2, periodMs: RATE_PERIOD_MS });
const rateKey = fc.option(
  fc.record({ key: fc.constantFrom("r1", "r2"), limit: fc.integer({ min: 1, max: 2 }), periodMs: fc.constant(RATE_PERIOD_MS) }),
  { freq: 3, nil: null },
);
const controlChange: fc.Arbitrary<ControlChange> = fc.oneof(
  fc.record({ kind: fc.constant("queue" as const), queue: fc.constantFrom(...QUEUES), paused: fc.boolean() }),
  fc.record({ kind: fc.constant("queue" as const), queue: fc.constantFrom(...QUEUES), maxRunning: cap }),
  fc.record({ kind: fc.constant("task" as const), task: fc.constantFrom(...TASKS), maxRunning: cap }),
  fc.record({ kind: fc.constant("queue" as const), queue: fc.constantFrom(...QUEUES), rateLimit: rate }),
  fc.record({ kind: fc.constant("task" as const), task: fc.constantFrom(...TASKS), rateLimit: rate }),
);
const jobPick = fc.nat({ max: 7 });
/** −1: a running job with its current token (see ModelState.pickLeased); else any job, any (possibly stale or never-issued) token. */
const tokenPick = fc.oneof({ weight: 2, arbitrary: fc.constant(-1) }, { weight: 3, arbitrary: fc.nat({ max: 7 }) });

/**
 * The command arbitraries of the model-based test, one per adapter
 * primitive. A new feature adds its command file and one entry here.
 */
export function modelCommands(): fc.Arbitrary<fc.AsyncCommand<ModelState, RealSystem>>[] {
  type Cmd = fc.AsyncCommand<ModelState, RealSystem>;
  const enqueue = fc
    .array(
      fc.record({
        queue: fc.constantFrom(...QUEUES),
        priority: fc.integer({ min: 0, max: 2 }),
        delayMs: fc.constantFrom(0, 0, 500, 1_500),
        maxAttempts: fc.integer({ min: 1, max: 3 }),
        task: fc.constantFrom(...TASKS),
        concurrency,
        idempotencyKey: fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom("i1", "i2", "i3") }),
        rateLimit: rateKey,
        debounce,
        // Parents for half the jobs: stored jobs by pick, now and then one that does not exist (-1).
        parents: fc.oneof(
          { weight: 1, arbitrary: fc.constant([] as number[]) },
          { weight: 1, arbitrary: fc.array(fc.oneof({ weight: 12, arbitrary: fc.nat({ max: 7 }) }, { weight: 1, arbitrary: fc.constant(-1) }), { minLength: 1, maxLength: 3 }) },
        ),
      }),
      { minLength: 1, maxLength: 3 },
    )
    .map((jobs): Cmd => new EnqueueCommand(jobs));
  const claim = fc
    .tuple(fc.constantFrom(["a"], ["b"], ["a", "b"]), fc.integer({ min: 0, max: 3 }), fc.constantFrom(MODEL_LEASE_MS, 2 * MODEL_LEASE_MS))
    .map(([q, l, ms]): Cmd => new ClaimCommand(q, l, ms));
  const w = (weight: number, arbitrary: fc.Arbitrary<Cmd>) => ({ weight, arbitrary });
  // One weighted choice (enqueue and claim more often than the rest); fc.commands shrinks it like a list of arbitraries.
  return [
    fc.oneof(
      w(3, enqueue),
      w(3, claim),
      w(1, fc.tuple(jobPick, tokenPick, fc.constantFrom(MODEL_LEASE_MS, 3 * MODEL_LEASE_MS)).map(([j, t, ms]) => new HeartbeatCommand(j, t, ms))),
      w(2, fc.tuple(jobPick, tokenPick).map(([j, t]) => new CompleteCommand(j, t))),
      w(1, fc.tuple(jobPick, tokenPick, fc.constantFrom("s1", "s2")).map(([j, t, s]) => new RecordStepCommand(j, t, s))),
      w(1, fc.tuple(jobPick, tokenPick, fc.constantFrom(null, 0, 700)).map(([j, t, r]) => new FailCommand(j, t, r))),
      w(1, fc.tuple(jobPick, tokenPick).map(([j, t]) => new ReleaseCommand(j, t))),
      w(1, jobPick.map((j) => new CancelCommand(j))),
      w(1, jobPick.map((j) => new ReplayCommand(j))),
      w(1, jobPick.map((j) => new RunNowCommand(j))),
      w(1, fc.tuple(fc.integer({ min: 1, max: 3 }), fc.constantFrom<string | null>(null, "a")).map(([l, q]) => new ReplayDeadCommand(l, q))),
      w(3, controlChange.map((c) => new ControlCommand(c))),
      w(1, fc.constantFrom(0, 700).map((r) => new ReclaimCommand(r))),
      w(2, fc.constantFrom(300, 700, MODEL_LEASE_MS + 1).map((ms) => new AdvanceClockCommand(ms))),
    ),
  ];
}
