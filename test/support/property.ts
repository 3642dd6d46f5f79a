import { afterAll, beforeAll, describe, it } from "vitest";
import { checkModel, checkSchedules, failureReport, type ScheduleStats } from "../../src/testing/property.ts";
import { checkFairness } from "../../src/testing/fairness-property.ts";
import { dropPropertyDatabases, openPropertyEnv, propertyRuns, type PropertyEnv } from "./property-env.ts";
import type { TargetName } from "./targets.ts";

/** Default runs inside `npm test`; `npm run test:deep` runs 20× as many. */
export const DEFAULT_MODEL_RUNS = 150;
export const DEFAULT_SCHEDULE_RUNS = 500;
export const DEFAULT_FAIRNESS_RUNS = 100;

/** The command that replays one failing run of `property` on `name`. */
export function replayCommand(name: TargetName, property: "model" | "schedules" | "fairness", seed: number, path: string): string {
  return `DOCKET_PROPERTY_SEED=${seed} DOCKET_PROPERTY_PATH=${path} npx vitest run test/property/${name}.test.ts -t "${property}"`;
}

function replayOptions(): { seed?: number; path?: string } {
  const seed = process.env.DOCKET_PROPERTY_SEED;
  const path = process.env.DOCKET_PROPERTY_PATH;
  return { ...(seed ? { seed: Number(seed) } : {}), ...(path ? { path } : {}) };
}

/** Registers the property tests for one adapter: the model-based test and the concurrent schedules. */
export async function defineProperties(name: TargetName): Promise<void> {
  let env: PropertyEnv | null = null;
  const probe = await openPropertyEnv(name);
  if (!probe) return;
  await probe.close();
  const deep = process.env.DOCKET_PROPERTY_DEEP === "1";
  const timeout = deep ? 3_600_000 : 300_000;
  describe(`${name}: property`, () => {
    beforeAll(async () => {
      env = await openPropertyEnv(name);
    });
    afterAll(async () => {
      await env?.close();
      await dropPropertyDatabases([name]);
    });

    it("model › every command sequence leaves the adapter in the reference model's state, step by step", async () => {
      const numRuns = propertyRuns(DEFAULT_MODEL_RUNS);
      const started = Date.now();
      const details = await checkModel(env!, { numRuns, ...replayOptions() });
      console.log(`${name} model: ${details.numRuns} runs in ${((Date.now() - started) / 1000).toFixed(1)} s (seed ${details.seed})`);
      const report = failureReport(details, (seed, path) => replayCommand(name, "model", seed, path));
      if (report) throw new Error(report);
    }, timeout);

    it("fairness › every sequence of fair enqueues, claims, outcomes and clock steps claims what the memory adapter (the reference) claims", async () => {
      const numRuns = propertyRuns(DEFAULT_FAIRNESS_RUNS);
      const started = Date.now();
      const details = await checkFairness(env!, { numRuns, ...replayOptions() });
      console.log(`${name} fairness: ${details.numRuns} runs in ${((Date.now() - started) / 1000).toFixed(1)} s (seed ${details.seed})`);
      const report = failureReport(details, (seed, path) => replayCommand(name, "fairness", seed, path));
      if (report) throw new Error(report);
    }, timeout);

    it("schedules › concurrent workers interleaved statement by statement never break an invariant", async () => {
      const numRuns = propertyRuns(DEFAULT_SCHEDULE_RUNS);
      const stats: ScheduleStats = { runs: 0, timedOut: 0, statements: 0 };
      const started = Date.now();
      const details = await checkSchedules(env!, { numRuns, ...replayOptions() }, stats);
      console.log(
        `${name} schedules: ${details.numRuns} runs (${stats.runs} incl. shrinking, ${stats.statements} statements gated, ${stats.timedOut} timed out) in ${((Date.now() - started) / 1000).toFixed(1)} s (seed ${details.seed})`,
      );
      const report = failureReport(details, (seed, path) => replayCommand(name, "schedules", seed, path));
      if (report) throw new Error(report);
      if (stats.timedOut > Math.max(1, stats.runs / 20)) throw new Error(`${stats.timedOut} of ${stats.runs} runs timed out: lock-wait detection is failing`);
    }, timeout);
  });
}
