import fc from "fast-check";
import { AdvanceClockCommand } from "./advance-clock.ts";
import { CancelCommand } from "./cancel.ts";
import { ClaimCommand } from "./claim.ts";
import { CompleteCommand } from "./complete.ts";
import { EnqueueCommand } from "./enqueue.ts";
import { FailCommand } from "./fail.ts";
import { HeartbeatCommand } from "./heartbeat.ts";
import { ReclaimCommand } from "./reclaim.ts";
import { ReleaseCommand } from "./release.ts";
import type { ModelState, RealSystem } from "./context.ts";

export { ModelState, type RealSystem, expectSame, expectSameList, expectSameStore } from "./context.ts";
export { AdvanceClockCommand, CancelCommand, ClaimCommand, CompleteCommand, EnqueueCommand, FailCommand, HeartbeatCommand, ReclaimCommand, ReleaseCommand };
export { expiryPlan } from "./reclaim.ts";

/** Lease length the command arbitraries use; the clock advances in steps around it. */
export const MODEL_LEASE_MS = 1_000;

const QUEUES = ["a", "b"];
const jobPick = fc.nat({ max: 7 });
const tokenPick = fc.nat({ max: 7 });

/**
 * The command arbitraries of the model-based test, one per adapter
 * primitive. A new feature adds its command file and one entry here.
 */
export function modelCommands(): fc.Arbitrary<fc.AsyncCommand<ModelState, RealSystem>>[] {
  return [
    fc
      .array(
        fc.record({
          queue: fc.constantFrom(...QUEUES),
          priority: fc.integer({ min: 0, max: 2 }),
          delayMs: fc.constantFrom(0, 0, 500, 1_500),
          maxAttempts: fc.integer({ min: 1, max: 3 }),
        }),
        { minLength: 1, maxLength: 3 },
      )
      .map((jobs) => new EnqueueCommand(jobs)),
    fc
      .tuple(fc.constantFrom(["a"], ["b"], ["a", "b"]), fc.integer({ min: 0, max: 3 }), fc.constantFrom(MODEL_LEASE_MS, 2 * MODEL_LEASE_MS))
      .map(([q, l, ms]) => new ClaimCommand(q, l, ms)),
    fc.tuple(jobPick, tokenPick, fc.constantFrom(MODEL_LEASE_MS, 3 * MODEL_LEASE_MS)).map(([j, t, ms]) => new HeartbeatCommand(j, t, ms)),
    fc.tuple(jobPick, tokenPick).map(([j, t]) => new CompleteCommand(j, t)),
    fc.tuple(jobPick, tokenPick, fc.constantFrom(null, 0, 700)).map(([j, t, r]) => new FailCommand(j, t, r)),
    fc.tuple(jobPick, tokenPick).map(([j, t]) => new ReleaseCommand(j, t)),
    jobPick.map((j) => new CancelCommand(j)),
    fc.constantFrom(0, 700).map((r) => new ReclaimCommand(r)),
    fc.constantFrom(300, 700, MODEL_LEASE_MS + 1).map((ms) => new AdvanceClockCommand(ms)),
  ];
}
