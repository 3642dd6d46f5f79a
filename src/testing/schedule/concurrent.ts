import type fc from "fast-check";
import { withStep } from "../../core/steps.ts";
import type { DocketAdapter, SettleItem } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import type { HandlerEvent, HistoryEvent, OperationEvent, RunLimits, RunRecord } from "../invariants.ts";
import type { JobOp } from "../model/model.ts";
import { extendLease, settleOne } from "../lease-writes.ts";
import type { StatementScheduler, ReleasedStatement } from "./statement-scheduler.ts";

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
export type JobStart = "ready" | "future" | "running-live" | "running-expired" | "dead";
export interface JobSetup {
  readonly start: JobStart;
  readonly priority: number;
  readonly maxAttempts: number;
  /** Index into QUEUES: qa may be capped, qb may start paused, qc is plain. */
  readonly queue: number;
  readonly task: string;
  /** A concurrency key (its limit is the scenario's), or null. */
  readonly key: string | null;
  /** An idempotency key (IDEMPOTENCY_KEYS), or null; at most one setup job holds each. */
  readonly idempotencyKey: string | null;
  /** Whether it carries the rate key RATE_KEY (limit: the scenario's `rateR`); only jobs that start ready or scheduled do. */
  readonly rated?: boolean;
  /** A fairness key (weight 1), or absent. */
  readonly fairKey?: string | null;
  /** Whether it is the pending job of debounce key DEBOUNCE_KEY (payload `{"n":0}`; only a ready job of no other key is). */
  readonly debounced?: boolean;
  /** Its parents, as indexes of earlier setup jobs that are neither dead nor debounced (EnqueueOptions.after): it starts waiting. */
  readonly after?: readonly number[];
}

/** The rate key of rated setup jobs; its window and qa's (RATE_PERIOD_MS) span the whole run. */
export const RATE_KEY = "r";
export const RATE_PERIOD_MS = 3_600_000;

/** The queues of a scenario; every claim asks for all of them. */
export const QUEUES = ["qa", "qb", "qc"] as const;
export const TASKS = ["t", "u"] as const;
/** The debounce key of the schedules' debounced enqueues (see WorkerStep "enqueue"). */
export const DEBOUNCE_KEY = "d1";
export const KEYS = ["k1", "k2"] as const;
/** Idempotency keys; a key holds for the whole run (nothing is purged). */
export const IDEMPOTENCY_KEYS = ["i1", "i2"] as const;
/** The queue whose pause the scenario and the pause/resume steps toggle. */
export const PAUSABLE = "qb";

/** Stored controls and key limits, fixed for the run (only qb's pause changes). */
export interface ScenarioControls {
  /** Limit per key, 1–2 (every enqueue of the key uses it). */
  readonly keyLimits: Readonly<Record<string, number>>;
  /** qa's cap, or null. */
  readonly capA: number | null;
  /** task u's cap, or null. */
  readonly capU: number | null;
  /** qb paused at the start. */
  readonly pausedB: boolean;
  /** qa's rate limit per RATE_PERIOD_MS (set after the setup's claims, so only the run's starts count), or null. */
  readonly rateA?: number | null;
  /** The rate key's limit per RATE_PERIOD_MS. */
  readonly rateR?: number;
}

/** What a handler does with a job it holds. "crash" writes nothing (the lease will expire); "step-complete" records a durable step first. */
export type Outcome = "complete" | "fail" | "release" | "heartbeat-complete" | "step-complete" | "crash";

export type WorkerStep =
  | { readonly kind: "claim"; readonly limit: number; readonly outcome: Outcome }
  /** Acts on a job set up as running, with the lease token it was set up with (a live worker or a zombie). */
  | { readonly kind: "hold"; readonly job: number; readonly outcome: Outcome }
  | { readonly kind: "sweep" }
  | { readonly kind: "cancel"; readonly job: number }
  /** Enqueues one ready job (racing claims, completions and other enqueues of its key). */
  | {
      readonly kind: "enqueue";
      readonly queue: number;
      readonly task: string;
      readonly key: string | null;
      readonly priority: number;
      readonly idempotencyKey: string | null;
      /** A debounced enqueue of key DEBOUNCE_KEY (delay 0: due at once, so claims race it); never keyed or idempotent. */
      readonly debounce?: boolean;
    }
  /** Bulk replay of the dead jobs that died by the worker's now (racing other replays, claims of replayed jobs). */
  | { readonly kind: "replayDead"; readonly limit: number }
  /** Pauses or resumes qb. */
  | { readonly kind: "pause"; readonly paused: boolean };

export interface WorkerProgram {
  readonly skew: number;
  readonly steps: readonly WorkerStep[];
}

export interface Scenario {
  readonly jobs: readonly JobSetup[];
  readonly controls: ScenarioControls;
  readonly workers: readonly WorkerProgram[];
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

/** Operations whose accepted write may free a key slot (complete, retry/bury, expire, cancel): they rebalance the key. */
const FREEING = new Set(["complete", "fail", "expire", "cancel"]);

export interface ScheduleRun {
  readonly record: RunRecord;
  readonly released: readonly ReleasedStatement[];
  readonly timedOut: boolean;
}

/** The stored key spec of a job: the scenario's limit, blocking. */
function concurrencyOf(key: string | null, c: ScenarioControls) {
  return key === null ? null : { key, limit: c.keyLimits[key] ?? 1, onConflict: "block" as const };
}

/**
 * Sets the jobs up (ungated) as the scenario says; returns their ids and the
 * lease tokens of the running ones. Running jobs are enqueued and claimed
 * first, one at a time (each is then its queue's only ready job); a keyed
 * one its key did not admit stays as stored (blocked) and has no token, and
 * so does one beyond qa's or task u's cap (it stays ready). The
 * other jobs follow in one batch, then the controls are stored.
 */
async function setup(env: ScheduleEnv, scenario: Scenario): Promise<{ ids: number[]; tokens: (string | null)[] }> {
  await env.reset();
  const c = scenario.controls;
  const newJob = (j: JobSetup) => ({
    task: j.task,
    queue: QUEUES[j.queue]!,
    payload: "{}",
    state: j.start === "future" ? ("scheduled" as const) : ("ready" as const),
    priority: j.priority,
    runAt: j.start === "future" ? T0 + LEASE_MS : T0 - 3 * LEASE_MS,
    maxAttempts: j.maxAttempts,
    backoff: null,
    concurrency: concurrencyOf(j.key, c),
    ...(j.idempotencyKey === null ? {} : { idempotencyKey: j.idempotencyKey }),
    ...(j.rated && (j.start === "ready" || j.start === "future") ? { rateLimit: { key: RATE_KEY, limit: c.rateR ?? 1, periodMs: RATE_PERIOD_MS } } : {}),
    ...(j.fairKey ? { fairness: { key: j.fairKey, weight: 1 } } : {}),
    ...(j.debounced ? { payload: JSON.stringify({ n: 0 }), debounce: { key: DEBOUNCE_KEY, delayMs: 0, maxWaitMs: null } } : {}),
  });
  const ids: number[] = new Array(scenario.jobs.length);
  const tokens: (string | null)[] = new Array(scenario.jobs.length).fill(null);
  // The run starts within the caps: a running job beyond qa's or task u's cap is set up ready instead (no token).
  const toRun = new Set<number>();
  for (const [i, j] of scenario.jobs.entries()) {
    if (j.start !== "running-live" && j.start !== "running-expired") continue;
    const running = (f: (x: JobSetup) => boolean) => [...toRun].filter((k) => f(scenario.jobs[k]!)).length;
    if (j.queue === 0 && c.capA !== null && running((x) => x.queue === 0) >= c.capA) continue;
    if (j.task === "u" && c.capU !== null && running((x) => x.task === "u") >= c.capU) continue;
    toRun.add(i);
  }
  // Dead jobs first, one at a time: enqueued, claimed and buried (each is then its queue's only ready job).
  for (const [i, j] of scenario.jobs.entries()) {
    if (j.start !== "dead") continue;
    const [stored] = await env.plain.enqueue({ jobs: [newJob(j)], now: T0 - 3 * LEASE_MS });
    ids[i] = stored!.id;
    const now = T0 - 2 * LEASE_MS;
    const got = await env.plain.claim({ queues: [QUEUES[j.queue]!], limit: 1, now, leaseToken: `dead${i}`, leaseExpiresAt: now + LEASE_MS });
    if (got.length !== 1 || got[0]!.id !== stored!.id) throw new Error(`setup: could not claim job ${i} to bury it`);
    const buried = await settleOne(env.plain, { kind: "fail", id: stored!.id, now, leaseToken: `dead${i}`, error: "boom", retryAt: null });
    if (buried?.state !== "dead") throw new Error(`setup: could not bury job ${i}`);
  }
  for (const i of toRun) {
    const j = scenario.jobs[i]!;
    const [stored] = await env.plain.enqueue({ jobs: [newJob(j)], now: T0 - 3 * LEASE_MS });
    ids[i] = stored!.id;
    if (stored!.state !== "ready") continue;
    const live = j.start === "running-live";
    const now = live ? T0 : T0 - 2 * LEASE_MS;
    const token = `pre${i}`;
    const got = await env.plain.claim({ queues: [QUEUES[j.queue]!], limit: 1, now, leaseToken: token, leaseExpiresAt: now + LEASE_MS });
    if (got.length !== 1 || got[0]!.id !== stored!.id) throw new Error(`setup: could not put job ${i} in running`);
    tokens[i] = token;
  }
  const rest = scenario.jobs.map((j, i) => ({ j, i })).filter(({ i, j }) => !toRun.has(i) && j.start !== "dead" && !j.after?.length);
  const stored = await env.plain.enqueue({ jobs: rest.map(({ j }) => newJob(j)), now: T0 - 3 * LEASE_MS });
  rest.forEach(({ i }, k) => (ids[i] = stored[k]!.id));
  // Children last, one at a time in setup order (a child's parents, earlier setup jobs, have their ids by then).
  for (const [i, j] of scenario.jobs.entries()) {
    if (!j.after?.length) continue;
    const [child] = await env.plain.enqueue({ jobs: [{ ...newJob(j), after: { ids: j.after.map((p) => ids[p]!), refs: [] } }], now: T0 - 3 * LEASE_MS });
    ids[i] = child!.id;
  }
  if (c.capA !== null) await env.plain.setQueueControl({ queue: "qa", maxRunning: c.capA });
  if (c.pausedB) await env.plain.setQueueControl({ queue: PAUSABLE, paused: true });
  if (c.capU !== null) await env.plain.setTaskControl({ task: "u", maxRunning: c.capU });
  if (c.rateA != null) await env.plain.setQueueControl({ queue: "qa", rateLimit: { limit: c.rateA, periodMs: RATE_PERIOD_MS } });
  return { ids, tokens };
}

/** The fixed limits of a scenario, for the invariants. */
function limitsOf(scenario: Scenario): RunLimits {
  const c = scenario.controls;
  return {
    keys: { ...c.keyLimits },
    queueCaps: c.capA === null ? {} : { qa: c.capA },
    taskCaps: c.capU === null ? {} : { u: c.capU },
    pausedAtStart: c.pausedB ? [PAUSABLE] : [],
    rates: { queues: c.rateA == null ? {} : { qa: c.rateA }, keys: scenario.jobs.some((j) => j.rated) ? { [RATE_KEY]: c.rateR ?? 1 } : {} },
  };
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
  const queues = [...QUEUES];
  /** Every job known to this run (set up, or enqueued by a step so far), by id. */
  const known = new Map(initial.map((j) => [j.id, j]));
  /** Debounced enqueues so far: each gives its own payload, so a claim shows whose merge it runs. */
  let payloads = 0;
  const keyOf = (id: number) => known.get(id)?.concurrencyKey ?? null;
  const statements = env.statements;
  /** Each worker's operation in progress, to time its first released statement. */
  const current = new Map<string, OperationEvent>();

  const runWorker = async (w: WorkerProgram, index: number): Promise<void> => {
    const { label, adapter } = env.workers[index]!;
    const now = T0 + w.skew;
    let seq = 0;
    const operation = async <T>(
      name: string,
      detail: string,
      call: () => Promise<T>,
      /** The per-job effects of the result; may also annotate the event (created jobs, admissions, control changes). */
      effects: (r: T, event: OperationEvent) => OperationEvent["effects"],
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
      current.set(label, event);
      try {
        const r = await call();
        event.end = tick();
        event.effects = effects(r, event);
        // An accepted write that frees a slot rebalances the job's key in its transaction.
        if (FREEING.has(name)) {
          const keys = [...new Set(event.effects.filter((e) => e.result !== null).map((e) => keyOf(e.id)).filter((k): k is string => k !== null))];
          if (keys.length > 0) event.admits = { now, keys };
        }
        return r;
      } catch (error) {
        event.end = tick();
        event.error = error instanceof Error ? error.message : String(error);
        return undefined;
      }
    };
    const one = (id: number, op: JobOp) => (r: JobRecord | null) => [{ id, op, result: r }];
    // On the kysely store an outcome item without `concurrencyKey` is one guarded transition, which returns the whole row.
    const outcome = async (item: SettleItem) => (await settleOne(adapter, item)) as JobRecord | null;

    const handle = async (id: number, leaseToken: string, what: Outcome, resumed = false): Promise<void> => {
      const h: HandlerEvent = { kind: "handler", worker: label, id, leaseToken, resumed, start: tick(), end: 0, outcomeAccepted: null };
      history.push(h);
      let result: JobRecord | null | undefined;
      if (what === "heartbeat-complete") {
        const op = { kind: "heartbeat" as const, now, leaseToken, leaseExpiresAt: now + 3 * LEASE_MS };
        await operation("heartbeat", ` #${id}`, () => extendLease(adapter, { id, ...op }), (kept) => [{ id, op, result: null, accepted: kept }]);
      }
      if (what === "step-complete") {
        // The attempt's whole list of steps, one step named by its worker: a stale attempt's write would replace the fresh one's.
        const op = { kind: "recordStep" as const, now, leaseToken, steps: withStep(null, label, JSON.stringify(leaseToken), now) };
        await operation("recordStep", ` #${id}`, () => adapter.recordStep({ id, ...op }), one(id, op));
      }
      if (what === "complete" || what === "heartbeat-complete" || what === "step-complete") {
        const op = { kind: "complete" as const, now, leaseToken };
        result = await operation("complete", ` #${id}`, () => outcome({ id, ...op }), one(id, op));
      } else if (what === "fail") {
        const job = known.get(id);
        // The attempt that failed is the one this lease started; bury on the last one.
        const current = await peekAttempt(history, id, leaseToken, job);
        const op = { kind: "fail" as const, now, leaseToken, error: "boom", retryAt: current >= (job?.maxAttempts ?? 1) ? null : now };
        result = await operation("fail", ` #${id}`, () => outcome({ id, ...op }), one(id, op));
      } else if (what === "release") {
        const op = { kind: "release" as const, now, leaseToken };
        result = await operation("release", ` #${id}`, () => outcome({ id, ...op }), one(id, op));
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
      } else if (step.kind === "cancel") {
        const id = ids[step.job]!;
        const op = { kind: "cancel" as const, now };
        await operation("cancel", ` #${id}`, () => adapter.cancel({ id, now }), one(id, op));
      } else if (step.kind === "enqueue") {
        const debounce = step.debounce === true ? { key: DEBOUNCE_KEY, delayMs: 0, maxWaitMs: null } : null;
        const payload = debounce ? JSON.stringify({ n: ++payloads }) : "{}";
        const job = {
          task: step.task,
          queue: QUEUES[step.queue]!,
          payload,
          state: debounce ? ("scheduled" as const) : ("ready" as const),
          priority: step.priority,
          runAt: now,
          maxAttempts: 2,
          backoff: null,
          concurrency: concurrencyOf(step.key, scenario.controls),
          ...(step.idempotencyKey === null ? {} : { idempotencyKey: step.idempotencyKey }),
          ...(debounce ? { debounce } : {}),
        };
        await operation(
          "enqueue",
          ` ${job.queue}/${job.task}${step.key ? `/${step.key}` : ""}${step.idempotencyKey ? ` idem ${step.idempotencyKey}` : ""}${debounce ? ` debounce ${payload}` : ""}`,
          () => adapter.enqueue({ jobs: [job], now }),
          (stored, e) => {
            for (const r of stored) if (!known.has(r.id)) known.set(r.id, r);
            e.created = stored.filter((r) => r.created);
            e.enqueued = stored.map((r) => ({
              idempotencyKey: step.idempotencyKey,
              id: r.id,
              created: r.created,
              heldKey: r.idempotencyKey,
              ...(debounce ? { debounceKey: debounce.key, payload } : {}),
            }));
            // The enqueue rebalances its key (under the key's lock) before inserting.
            if (step.key !== null) e.admits = { now, keys: [step.key] };
            // A merge moves the pending job (its options and run time the enqueue's).
            const merged = debounce ? stored.filter((r) => !r.created) : [];
            return merged.map((r) => ({ id: r.id, op: { kind: "debounce" as const, now, runAt: r.runAt, priority: job.priority, maxAttempts: job.maxAttempts, timeoutMs: null, rateKey: null }, result: r }));
          },
        );
      } else if (step.kind === "replayDead") {
        const op = { kind: "replay" as const, now };
        await operation(
          "replayDead",
          ` ≤${step.limit}`,
          () => adapter.replayDead({ diedBefore: now, limit: step.limit, now }),
          (r) => r.map((j) => ({ id: j.id, op, result: j })),
        );
      } else {
        await operation(
          step.paused ? "pause" : "resume",
          ` ${PAUSABLE}`,
          () => adapter.setQueueControl({ queue: PAUSABLE, paused: step.paused }),
          (_r, e) => {
            e.control = { queue: PAUSABLE, paused: step.paused };
            return [];
          },
        );
      }
    }
  };

  statements.begin(s);
  statements.onRelease = (connection) => {
    const e = current.get(connection);
    if (!e || e.end !== 0) return;
    const t = tick();
    e.firstStatement ??= t;
    e.lastStatement = t;
  };
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
    statements.onRelease = null;
    statements.end();
  }
  const released = [...statements.released];
  const final = await env.plain.list({ limit: 1_000 });
  const dependencies = scenario.jobs.flatMap((j, i) => (j.after?.length ? [{ child: ids[i]!, parents: j.after.map((p) => ids[p]!) }] : []));
  return { record: { initial, final, history, limits: limitsOf(scenario), ...(dependencies.length > 0 ? { dependencies } : {}) }, released, timedOut };
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
  const c = s.controls;
  const controls = `controls: key limits ${Object.entries(c.keyLimits).map(([k, l]) => `${k}≤${l}`).join(" ")}; qa cap ${c.capA ?? "none"}; task u cap ${c.capU ?? "none"}; qb ${c.pausedB ? "paused" : "running"}; qa rate ${c.rateA ?? "none"}; rate key ${RATE_KEY} ${c.rateR ?? 1}/h`;
  const jobs = s.jobs.map(
    (j, i) => `job ${i}: ${j.start}, ${QUEUES[j.queue]}/${j.task}${j.key ? `/${j.key}` : ""}${j.idempotencyKey ? ` idem ${j.idempotencyKey}` : ""}${j.rated ? ` rate ${RATE_KEY}` : ""}, priority ${j.priority}, maxAttempts ${j.maxAttempts}`,
  );
  const step = (st: WorkerStep): string => {
    switch (st.kind) {
      case "claim":
        return `claim ≤${st.limit} → ${st.outcome}`;
      case "hold":
        return `hold job ${st.job} → ${st.outcome}`;
      case "sweep":
        return "sweep";
      case "cancel":
        return `cancel job ${st.job}`;
      case "enqueue":
        return `enqueue ${QUEUES[st.queue]}/${st.task}${st.key ? `/${st.key}` : ""} p${st.priority}${st.idempotencyKey ? ` idem ${st.idempotencyKey}` : ""}${st.debounce ? ` debounce ${DEBOUNCE_KEY}` : ""}`;
      case "replayDead":
        return `replayDead ≤${st.limit}`;
      case "pause":
        return `${st.paused ? "pause" : "resume"} ${PAUSABLE}`;
    }
  };
  const workers = s.workers.map((w, i) => `w${i + 1} (clock T0+${w.skew}): ${w.steps.map(step).join(", ")}`);
  return [controls, ...jobs, ...workers].join("\n");
}
