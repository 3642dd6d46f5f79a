import fc from "fast-check";
import { allInvariants, checkInvariants, type Invariant } from "./invariants.ts";
import { ModelState, modelCommands } from "./model/commands/index.ts";
import { T0, describeScenario, runScenario, type ScheduleEnv } from "./schedule/concurrent.ts";
import { scenarioArbitrary } from "./schedule/scenarios.ts";

/**
 * The property suite, runner-agnostic (vitest, `deno test` and
 * scripts/mutations.ts all call these): each returns fast-check's run
 * details; `failureReport` turns a failure into the text to print.
 */
export interface PropertyOptions {
  numRuns: number;
  seed?: number;
  path?: string;
  /** Stop at the first counterexample without shrinking (the mutation runner). */
  endOnFailure?: boolean;
  /** Per-run timeout of a concurrent schedule, ms. */
  runTimeoutMs?: number;
  invariants?: readonly Invariant[];
}

function params(o: PropertyOptions): fc.Parameters<unknown> {
  return {
    numRuns: o.numRuns,
    ...(o.seed === undefined ? {} : { seed: o.seed }),
    ...(o.path === undefined ? {} : { path: o.path }),
    ...(o.endOnFailure ? { endOnFailure: true } : {}),
  };
}

/** Model-based: random command sequences on one (ungated) worker adapter, compared with the reference model after every step. */
export async function checkModel(env: ScheduleEnv, o: PropertyOptions): Promise<fc.RunDetails<unknown>> {
  const real = { adapter: env.workers[0]!.adapter };
  const property = fc.asyncProperty(fc.commands(modelCommands(), { maxCommands: 40, size: "medium" }), async (cmds) => {
    await env.reset();
    await fc.asyncModelRun(() => ({ model: new ModelState(T0), real }), cmds);
  });
  return fc.check(property, params(o) as fc.Parameters<[Iterable<fc.AsyncCommand<ModelState, typeof real>>]>) as Promise<fc.RunDetails<unknown>>;
}

/** Counts of what concurrent runs did, for the log. */
export interface ScheduleStats {
  runs: number;
  timedOut: number;
  statements: number;
}

/**
 * Concurrent schedules: random scenarios interleaved statement by statement
 * by fc.scheduler; every invariant is checked after every run. The error of
 * a failing run lists the scenario, the violations and the statement order.
 */
export async function checkSchedules(env: ScheduleEnv, o: PropertyOptions, stats?: ScheduleStats): Promise<fc.RunDetails<unknown>> {
  const invariants = o.invariants ?? allInvariants;
  const property = fc.asyncProperty(scenarioArbitrary(env.workers.length), fc.scheduler(), async (scenario, s) => {
    const run = await runScenario(env, scenario, s, o.runTimeoutMs ?? 10_000);
    if (stats) {
      stats.runs++;
      stats.statements += run.released.length;
      if (run.timedOut) stats.timedOut++;
    }
    // A timed-out run was recovered by cancelling statements: its history is not a real one.
    if (run.timedOut) return;
    const violations = checkInvariants(run.record, invariants);
    if (violations.length > 0) {
      throw new Error(
        [
          `${violations.length} invariant violation(s):`,
          ...violations.map((v) => `  - ${v}`),
          "scenario:",
          ...describeScenario(scenario).split("\n").map((l) => `  ${l}`),
          "statement order (as released and settled):",
          ...run.released.map((r, i) => `  ${String(i + 1).padStart(3)}. ${r.connection} ${r.operation} › ${r.statement}`),
        ].join("\n"),
      );
    }
  });
  return fc.check(property, params(o) as fc.Parameters<[unknown, fc.Scheduler]>) as Promise<fc.RunDetails<unknown>>;
}

/** The text to print for a failed run: seed, path, replay command, counterexample, error. */
export function failureReport(details: fc.RunDetails<unknown>, replay: (seed: number, path: string) => string): string | null {
  if (!details.failed) return null;
  const path = details.counterexamplePath ?? "";
  const error = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
  return [
    `Property failed after ${details.numRuns} run(s), shrunk ${details.numShrinks} time(s).`,
    `seed: ${details.seed}  path: ${JSON.stringify(path)}`,
    `replay: ${replay(details.seed, path)}`,
    `counterexample: ${fc.stringify(details.counterexample)}`,
    error,
  ].join("\n");
}
