import fc from "fast-check";
import type { DocketAdapter } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import type { HandlerEvent, HistoryEvent, OperationEvent, RunRecord } from "../invariants.ts";
import type { JobOp } from "../model/model.ts";
import type { StatementScheduler, ReleasedStatement } from "./scheduled-dialect.ts";

/**
 * Concurrent schedules: a few simulated workers, each on its own gated
 * connection, run small programs at once; the fast-check scheduler picks
 * which statement goes next. Times are fixed offsets from T0 so that leases
 * can be live for one worker and expired for another (clock skew), which is
 * how zombies, sweepers and heartbeats race.
 */
export const T0 = Date.UTC(2030, 0, 1);
export const LEASE_MS = 1_000;
/** A worker's clock is T0 + skew. 1500 sees every lease taken at T0 as expired. */
export const SKEWS = [0, 1_500] as const;

/** How a job is set up before the concurrent phase. */
export type JobStart = "ready" | "future" | "running-live" | "running-expired";
export interface JobSetup {
  readonly start: JobStart;
  readonly priority: number;
  readonly maxAttempts: number;
}

/** What a handler does with a job it holds. "crash" writes nothing (the lease will expire). */
export type Outcome = "complete" | "fail" | "release" | "heartbeat-complete" | "crash";

export type WorkerStep =
  | { readonly kind: "claim"; readonly limit: number; readonly outcome: Outcome }
  /** Acts on a job set up as running, with the lease token it was set up with (a live worker or a zombie). */
  | { readonly kind: "hold"; readonly job: number; readonly outcome: Outcome }
  | { readonly kind: "sweep" }
  | { readonly kind: "cancel"; readonly job: number };

export interface WorkerProgram {
  readonly skew: number;
  readonly steps: readonly WorkerStep[];
}

export interface Scenario {
  readonly jobs: readonly JobSetup[];
  readonly workers: readonly WorkerProgram[];
}

const outcome = fc.constantFrom<Outcome>("complete", "fail", "release", "heartbeat-complete", "heartbeat-complete", "crash");

/** Random scenarios: 1–4 jobs, 2–`maxWorkers` workers of 1–2 steps each. */
export function scenarioArbitrary(maxWorkers: number): fc.Arbitrary<Scenario> {
  return fc.integer({ min: 1, max: 4 }).chain((n) => {
    const job = fc.nat({ max: n - 1 });
    const step: fc.Arbitrary<WorkerStep> = fc.oneof(
      { weight: 4, arbitrary: fc.record({ kind: fc.constant("claim" as const), limit: fc.integer({ min: 1, max: 2 }), outcome }) },
      { weight: 3, arbitrary: fc.record({ kind: fc.constant("hold" as const), job, outcome }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant("sweep" as const) }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant("cancel" as const), job }) },
    );
    return fc.record({
      jobs: fc.array(
        fc.record({
          start: fc.constantFrom<JobStart>("ready", "ready", "future", "running-live", "running-live", "running-expired"),
          priority: fc.integer({ min: 0, max: 1 }),
          maxAttempts: fc.integer({ min: 1, max: 2 }),
        }),
        { minLength: n, maxLength: n },
      ),
      workers: fc.array(fc.record({ skew: fc.constantFrom(...SKEWS), steps: fc.array(step, { minLength: 1, maxLength: 2 }) }), {
        minLength: 2,
        maxLength: maxWorkers,
      }),
    });
  });
}

/** One simulated worker: a label and an adapter on its own gated connection. */
export interface ScheduledWorker {
  readonly label: string;
  readonly adapter: DocketAdapter;
}

/** What a concurrent run needs from the test environment. */
export interface ScheduleEnv {
  readonly statements: StatementScheduler;
  readonly workers: readonly ScheduledWorker[];
  /** Ungated (and never mutated) adapter for setup and snapshots. */
  readonly plain: DocketAdapter;
  /** Empties the jobs table (ungated). */
  reset(): Promise<void>;
  /** Cancels every statement in flight on the worker connections (recovery after a run timeout). */
  cancelBlocked(): Promise<void>;
}

export interface ScheduleRun {
  readonly record: RunRecord;
  readonly released: readonly ReleasedStatement[];
  readonly timedOut: boolean;
}

const queueOf = (i: number) => `q${i}`;

/** Sets the jobs up (ungated) as the scenario says; returns their ids and the lease tokens of the running ones. */
async function setup(env: ScheduleEnv, scenario: Scenario): Promise<{ ids: number[]; tokens: (string | null)[] }> {
  await env.reset();
  const jobs = scenario.jobs.map((j, i) => ({
    task: "t",
    queue: queueOf(i),
    payload: "{}",
    state: j.start === "future" ? ("scheduled" as const) : ("ready" as const),
    priority: j.priority,
    runAt: j.start === "future" ? T0 + LEASE_MS : T0 - 3 * LEASE_MS,
    maxAttempts: j.maxAttempts,
    backoff: null,
  }));
  const stored = await env.plain.enqueue({ jobs, now: T0 - 3 * LEASE_MS });
  const tokens: (string | null)[] = [];
  for (const [i, j] of scenario.jobs.entries()) {
    if (j.start !== "running-live" && j.start !== "running-expired") {
      tokens.push(null);
      continue;
    }
    const live = j.start === "running-live";
    const now = live ? T0 : T0 - 2 * LEASE_MS;
    const token = `pre${i}`;
    const got = await env.plain.claim({ queues: [queueOf(i)], limit: 1, now, leaseToken: token, leaseExpiresAt: now + LEASE_MS });
    if (got.length !== 1) throw new Error(`setup: could not put job ${i} in running`);
    tokens.push(token);
  }
  return { ids: stored.map((s) => s.id), tokens };
}

/**
 * Runs one scenario under the fast-check scheduler `s` and returns the
 * recorded history with the database state before and after. A run that
 * exceeds `timeoutMs` is recovered (gates opened, blocked statements
 * cancelled) and reported with `timedOut`.
 */
export async function runScenario(
  env: ScheduleEnv,
  scenario: Scenario,
  s: fc.Scheduler,
  timeoutMs = 10_000,
): Promise<ScheduleRun> {
  if (scenario.workers.length > env.workers.length) throw new Error(`scenario needs ${scenario.workers.length} workers, env has ${env.workers.length}`);
  const { ids, tokens } = await setup(env, scenario);
  const initial = await env.plain.list({ limit: 1_000 });
  const history: HistoryEvent[] = [];
  let clock = 0;
  const tick = () => ++clock;
  const queues = scenario.jobs.map((_, i) => queueOf(i));
  const statements = env.statements;

  const runWorker = async (w: WorkerProgram, index: number): Promise<void> => {
    const { label, adapter } = env.workers[index]!;
    const now = T0 + w.skew;
    let seq = 0;
    const operation = async <T>(
      name: string,
      detail: string,
      call: () => Promise<T>,
      effects: (r: T) => OperationEvent["effects"],
      limit?: number,
    ): Promise<T | undefined> => {
      const opLabel = `${name}#${++seq}${detail}`;
      statements.setOperation(label, opLabel);
      const event: OperationEvent = {
        kind: "operation",
        worker: label,
        name,
        label: `${label} ${opLabel}`,
        start: tick(),
        end: 0,
        effects: [],
        ...(limit === undefined ? {} : { limit }),
        // A claim first stages every due scheduled job, in its own transactions.
        ...(name === "claim" ? { admits: { now, keys: "all" as const } } : {}),
      };
      history.push(event);
      try {
        const r = await call();
        event.end = tick();
        event.effects = effects(r);
        return r;
      } catch (error) {
        event.end = tick();
        event.error = error instanceof Error ? error.message : String(error);
        return undefined;
      }
    };
    const one = (id: number, op: JobOp) => (r: JobRecord | null) => [{ id, op, result: r }];

    const handle = async (id: number, leaseToken: string, what: Outcome, resumed = false): Promise<void> => {
      const h: HandlerEvent = { kind: "handler", worker: label, id, leaseToken, resumed, start: tick(), end: 0, outcomeAccepted: null };
      history.push(h);
      let result: JobRecord | null | undefined;
      if (what === "heartbeat-complete") {
        const op = { kind: "heartbeat" as const, now, leaseToken, leaseExpiresAt: now + 3 * LEASE_MS };
        await operation("heartbeat", ` #${id}`, () => adapter.heartbeat({ id, ...op }), one(id, op));
      }
      if (what === "complete" || what === "heartbeat-complete") {
        const op = { kind: "complete" as const, now, leaseToken };
        result = await operation("complete", ` #${id}`, () => adapter.complete({ id, ...op }), one(id, op));
      } else if (what === "fail") {
        const job = initial.find((j) => j.id === id);
        // The attempt that failed is the one this lease started; bury on the last one.
        const current = await peekAttempt(history, id, leaseToken, job);
        const op = { kind: "fail" as const, now, leaseToken, error: "boom", retryAt: current >= (job?.maxAttempts ?? 1) ? null : now };
        result = await operation("fail", ` #${id}`, () => adapter.fail({ id, ...op }), one(id, op));
      } else if (what === "release") {
        const op = { kind: "release" as const, now, leaseToken };
        result = await operation("release", ` #${id}`, () => adapter.release({ id, ...op }), one(id, op));
      }
      h.end = tick();
      h.outcomeAccepted = result === undefined ? null : result !== null;
    };

    for (const step of w.steps) {
      if (step.kind === "claim") {
        const leaseToken = `${label}.${seq + 1}`;
        const op = { kind: "claim" as const, now, leaseToken, leaseExpiresAt: now + LEASE_MS };
        const got = await operation(
          "claim",
          ` ≤${step.limit}`,
          () => adapter.claim({ queues, limit: step.limit, ...op }),
          (r) => r.map((j) => ({ id: j.id, op, result: j })),
          step.limit,
        );
        for (const j of got ?? []) await handle(j.id, leaseToken, step.outcome);
      } else if (step.kind === "hold") {
        const token = tokens[step.job];
        if (token) await handle(ids[step.job]!, token, step.outcome, true);
      } else if (step.kind === "sweep") {
        const expired = await operation("listExpired", "", () => adapter.listExpired({ now, limit: 100 }), () => []);
        for (const j of expired ?? []) {
          const op = { kind: "expire" as const, now, leaseToken: j.leaseToken!, error: "lease expired", retryAt: j.attempt >= j.maxAttempts ? null : now };
          await operation("expire", ` #${j.id}`, () => adapter.expire({ id: j.id, ...op }), one(j.id, op));
        }
      } else {
        const id = ids[step.job]!;
        const op = { kind: "cancel" as const, now };
        await operation("cancel", ` #${id}`, () => adapter.cancel({ id, now }), one(id, op));
      }
    }
  };

  statements.begin(s);
  let timedOut = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const all = Promise.allSettled(scenario.workers.map((w, i) => runWorker(w, i)));
  try {
    const timeout = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), timeoutMs)));
    const outcome = await Promise.race([s.waitFor(all).then(() => "done" as const), timeout]);
    if (outcome === "timeout") {
      timedOut = true;
      statements.abort();
      await env.cancelBlocked().catch(() => undefined);
      await all;
    }
  } finally {
    clearTimeout(timer);
    statements.end();
  }
  const released = [...statements.released];
  const final = await env.plain.list({ limit: 1_000 });
  return { record: { initial, final, history }, released, timedOut };
}

/** The attempt number a lease started: from the claim that returned it, else the setup row. */
async function peekAttempt(history: readonly HistoryEvent[], id: number, leaseToken: string, setupRow: JobRecord | undefined): Promise<number> {
  for (const e of history) {
    if (e.kind !== "operation") continue;
    for (const x of e.effects) if (x.id === id && x.op.kind === "claim" && x.op.leaseToken === leaseToken && x.result) return x.result.attempt;
  }
  return setupRow?.attempt ?? 1;
}

/** A scenario as readable lines (printed with a failure). */
export function describeScenario(s: Scenario): string {
  const jobs = s.jobs.map((j, i) => `job ${i}: ${j.start}, priority ${j.priority}, maxAttempts ${j.maxAttempts}`);
  const workers = s.workers.map(
    (w, i) =>
      `w${i + 1} (clock T0+${w.skew}): ${w.steps
        .map((st) => (st.kind === "claim" ? `claim ≤${st.limit} → ${st.outcome}` : st.kind === "hold" ? `hold job ${st.job} → ${st.outcome}` : st.kind === "sweep" ? "sweep" : `cancel job ${st.job}`))
        .join(", ")}`,
  );
  return [...jobs, ...workers].join("\n");
}
