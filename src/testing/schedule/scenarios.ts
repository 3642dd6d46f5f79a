import fc from "fast-check";
import { IDEMPOTENCY_KEYS, SKEWS, TASKS, type JobSetup, type JobStart, type Outcome, type Scenario, type ScenarioControls, type WorkerProgram, type WorkerStep } from "./concurrent.ts";

/**
 * The scenarios the concurrent schedules draw. Half are unconstrained
 * (any jobs, controls and steps); the other half come from the race
 * families, each a first-class schedule for one class of interleaving that
 * the unconstrained draw reaches only rarely:
 *
 * - lease: a live holder heartbeats (or records a durable step) and
 *   finishes while one or two sweepers with a skewed clock list and expire
 *   its lease (sweeper vs heartbeat, sweeper vs sweeper, zombie writes and
 *   steps: R25);
 * - claim: two or three claimers take the same few ready jobs, under caps
 *   (claim vs claim, cap counting, multi-statement claims);
 * - admission: enqueues, finishes and cancels of one key with limit 1
 *   (key lock, slot hand-off);
 * - lifecycle: idempotent enqueues of one key, and bulk replays of the same
 *   dead jobs racing each other and claims;
 * - rate: two or three claimers race for the last start of a rate key's
 *   limit (and of qa's), each holding a different ready job;
 * - fairness: claimers of one job each race over a fair queue's keys, one
 *   of them flooding (R21, judged by I13);
 * - debounce: debounced enqueues of one key (due at once) race each other
 *   and the claims of their pending job (R22, judged by I14);
 * - dependencies: two parents of one waiting child end at once, under two
 *   holders, while others claim and cancel (R23, judged by I15).
 *
 * A family only narrows the draw: every run is judged by every invariant.
 */
export function scenarioArbitrary(maxWorkers: number): fc.Arbitrary<Scenario> {
  return fc.oneof(
    { weight: 4, arbitrary: anyScenario(maxWorkers) },
    { weight: 1, arbitrary: leaseRace(maxWorkers) },
    { weight: 1, arbitrary: claimRace(maxWorkers) },
    { weight: 1, arbitrary: admissionRace(maxWorkers) },
    { weight: 1, arbitrary: lifecycleRace(maxWorkers) },
    { weight: 1, arbitrary: rateRace(maxWorkers) },
    { weight: 1, arbitrary: fairnessRace(maxWorkers) },
    { weight: 1, arbitrary: debounceRace(maxWorkers) },
    { weight: 1, arbitrary: dependencyRace(maxWorkers) },
  );
}

const outcome = fc.constantFrom<Outcome>("complete", "fail", "release", "heartbeat-complete", "heartbeat-complete", "step-complete", "crash");
const keyArb = fc.constantFrom<string | null>(null, null, "k1", "k1", "k2");
const idempotencyArb = fc.constantFrom<string | null>(null, null, null, ...IDEMPOTENCY_KEYS);
/** qa (the cappable queue) twice as often, so that concurrent claims meet its cap. */
const queue = fc.constantFrom(0, 0, 1, 2);
const task = fc.constantFrom(...TASKS);
const priority = fc.integer({ min: 0, max: 1 });

const controlsArb: fc.Arbitrary<ScenarioControls> = fc.record({
  keyLimits: fc.record({ k1: fc.integer({ min: 1, max: 2 }), k2: fc.integer({ min: 1, max: 2 }) }),
  capA: fc.constantFrom<number | null>(null, 1, 1, 2),
  capU: fc.constantFrom<number | null>(null, null, 1),
  pausedB: fc.boolean(),
  rateA: fc.constantFrom<number | null>(null, null, 1, 2),
  rateR: fc.integer({ min: 1, max: 2 }),
});

function jobArb(start: fc.Arbitrary<JobStart>, o: { queue?: fc.Arbitrary<number>; key?: fc.Arbitrary<string | null> } = {}): fc.Arbitrary<JobSetup> {
  return fc.record({
    start,
    priority,
    maxAttempts: fc.integer({ min: 1, max: 2 }),
    queue: o.queue ?? queue,
    task,
    key: o.key ?? keyArb,
    idempotencyKey: idempotencyArb,
    rated: fc.constantFrom(false, false, true),
  });
}

/**
 * A job or step with an idempotency key is of that key's task: a key names
 * one job across tasks, and an enqueue naming a key another task's job
 * holds is refused (IdempotencyConflictError; see the conformance cases).
 * Scenarios race enqueues that get the holder, so each key has one task.
 */
function ofKeyTask<J extends { task: string; idempotencyKey: string | null }>(j: J): J {
  if (j.idempotencyKey === null) return j;
  const i = (IDEMPOTENCY_KEYS as readonly string[]).indexOf(j.idempotencyKey);
  return { ...j, task: TASKS[Math.max(0, i) % TASKS.length]! };
}

/** Setup jobs with repeated idempotency keys lose the repeat: one setup job holds each key (and is of the key's task). */
function oneHolderPerKey(jobs: JobSetup[]): JobSetup[] {
  const held = new Set<string>();
  return jobs.map((j) => {
    if (j.idempotencyKey === null) return j;
    if (held.has(j.idempotencyKey)) return { ...j, idempotencyKey: null };
    held.add(j.idempotencyKey);
    return ofKeyTask(j);
  });
}

const claimStep = (o = outcome) => fc.record({ kind: fc.constant("claim" as const), limit: fc.integer({ min: 1, max: 2 }), outcome: o });
const holdStep = (job: fc.Arbitrary<number>, o = outcome) => fc.record({ kind: fc.constant("hold" as const), job, outcome: o });
const sweepStep = fc.constant({ kind: "sweep" as const });
const cancelStep = (job: fc.Arbitrary<number>) => fc.record({ kind: fc.constant("cancel" as const), job });
const enqueueStep = (o: { key?: fc.Arbitrary<string | null>; idempotencyKey?: fc.Arbitrary<string | null> } = {}) =>
  fc.record({ kind: fc.constant("enqueue" as const), queue, task, key: o.key ?? keyArb, priority, idempotencyKey: o.idempotencyKey ?? idempotencyArb }).map(ofKeyTask);
const replayStep = fc.record({ kind: fc.constant("replayDead" as const), limit: fc.integer({ min: 1, max: 3 }) });
const pauseStep = fc.record({ kind: fc.constant("pause" as const), paused: fc.boolean() });

function workersOf(programs: fc.Arbitrary<WorkerProgram>, min: number, max: number): fc.Arbitrary<WorkerProgram[]> {
  return fc.array(programs, { minLength: min, maxLength: Math.max(min, max) });
}

/**
 * Unconstrained: 1–5 jobs (some keyed, in three queues, two tasks, some
 * dead), controls (key limits 1–2, a cap on qa, a cap on task u, qb paused
 * or not), 2–`maxWorkers` workers of 1–2 steps each.
 */
function anyScenario(maxWorkers: number): fc.Arbitrary<Scenario> {
  return fc.integer({ min: 1, max: 5 }).chain((n) => {
    const job = fc.nat({ max: n - 1 });
    const step: fc.Arbitrary<WorkerStep> = fc.oneof(
      { weight: 5, arbitrary: claimStep() },
      { weight: 3, arbitrary: holdStep(job) },
      { weight: 2, arbitrary: sweepStep },
      { weight: 1, arbitrary: cancelStep(job) },
      { weight: 2, arbitrary: enqueueStep() },
      { weight: 1, arbitrary: replayStep },
      { weight: 1, arbitrary: pauseStep },
    );
    const start = fc.constantFrom<JobStart>("ready", "ready", "ready", "future", "running-live", "running-live", "running-expired", "dead");
    return fc.record({
      jobs: fc.array(jobArb(start), { minLength: n, maxLength: n }).map(oneHolderPerKey),
      controls: controlsArb,
      workers: workersOf(fc.record({ skew: fc.constantFrom(...SKEWS), steps: fc.array(step, { minLength: 1, maxLength: 2 }) }), 2, maxWorkers),
    });
  });
}

/** Job 0 runs under a lease; its holder (clock T0) heartbeats or finishes while 1–2 sweepers (clock T0+1500) expire it. */
function leaseRace(maxWorkers: number): fc.Arbitrary<Scenario> {
  const others = fc.array(jobArb(fc.constantFrom<JobStart>("ready", "running-expired")), { maxLength: 1 });
  return fc.record({
    first: jobArb(fc.constantFrom<JobStart>("running-live", "running-live", "running-expired")),
    others,
    controls: controlsArb,
    holder: outcome.filter((o) => o !== "crash"),
    sweepers: fc.integer({ min: 1, max: Math.min(2, maxWorkers - 1) }),
    then: fc.option(claimStep(), { nil: undefined }),
  }).map(({ first, others, controls, holder, sweepers, then }) => ({
    jobs: oneHolderPerKey([first, ...others]),
    controls,
    workers: [
      { skew: 0, steps: [{ kind: "hold" as const, job: 0, outcome: holder }] },
      ...Array.from({ length: sweepers }, (_, i) => ({ skew: SKEWS[1], steps: i === 0 && then ? [{ kind: "sweep" as const }, then] : [{ kind: "sweep" as const }] })),
    ],
  }));
}

/** 2–3 ready jobs, mostly in the capped qa, some keyed; 2–3 claimers; maybe one running job holding a cap's room. */
function claimRace(maxWorkers: number): fc.Arbitrary<Scenario> {
  const q = fc.constantFrom(0, 0, 0, 2);
  return fc.record({
    jobs: fc.array(jobArb(fc.constantFrom<JobStart>("ready", "ready", "ready", "running-live"), { queue: q }), { minLength: 2, maxLength: 3 }),
    controls: fc.record({
      keyLimits: fc.record({ k1: fc.integer({ min: 1, max: 2 }), k2: fc.integer({ min: 1, max: 2 }) }),
      capA: fc.constantFrom<number | null>(null, 1, 1, 2),
      capU: fc.constantFrom<number | null>(null, 1),
      pausedB: fc.constant(false),
    }),
    workers: workersOf(
      fc.record({
        skew: fc.constantFrom(...SKEWS),
        steps: fc.oneof(
          { weight: 3, arbitrary: claimStep(fc.constantFrom<Outcome>("complete", "crash", "release", "fail")).map((s) => [s]) },
          { weight: 1, arbitrary: fc.tuple(holdStep(fc.constant(0), fc.constant("complete")), claimStep()) },
        ),
      }),
      2,
      Math.min(3, maxWorkers),
    ),
  }).map((s) => ({ ...s, jobs: oneHolderPerKey(s.jobs) }));
}

/** 2–3 ready jobs of the rate key (limit 1), in qc (no cap, no queue limit); 2–3 workers claim once each. */
function rateRace(maxWorkers: number): fc.Arbitrary<Scenario> {
  return fc.record({
    jobs: fc.array(jobArb(fc.constant<JobStart>("ready"), { queue: fc.constant(2), key: fc.constant(null) }).map((j) => ({ ...j, rated: true, idempotencyKey: null })), { minLength: 2, maxLength: 3 }),
    // Nothing else holds the claimers back (no cap, no other limit): only the rate key's one start decides.
    controls: controlsArb.map((c) => ({ ...c, capA: null, capU: null, rateA: null, pausedB: false, rateR: 1 })),
    workers: workersOf(fc.record({ skew: fc.constant(0), steps: claimStep(fc.constantFrom<Outcome>("complete", "crash")).map((s) => [s]) }), 2, Math.min(3, maxWorkers)),
  }).map((s) => ({ ...s, jobs: oneHolderPerKey(s.jobs) }));
}

/** Key k1 with limit 1: 0–2 setup jobs of it; 2–3 workers enqueue it, finish or cancel its holder, claim. */
function admissionRace(maxWorkers: number): fc.Arbitrary<Scenario> {
  const k1 = fc.constant<string | null>("k1");
  return fc.integer({ min: 1, max: 2 }).chain((n) => {
    const job = fc.nat({ max: n - 1 });
    const step: fc.Arbitrary<WorkerStep> = fc.oneof(
      { weight: 3, arbitrary: enqueueStep({ key: k1, idempotencyKey: fc.constant(null) }) },
      { weight: 2, arbitrary: holdStep(job, fc.constantFrom<Outcome>("complete", "fail", "release")) },
      { weight: 2, arbitrary: claimStep(fc.constantFrom<Outcome>("complete", "fail", "crash")) },
      { weight: 1, arbitrary: cancelStep(job) },
    );
    return fc.record({
      jobs: fc.array(jobArb(fc.constantFrom<JobStart>("ready", "running-live", "running-live"), { key: k1 }), { minLength: n, maxLength: n }).map(oneHolderPerKey),
      controls: controlsArb.map((c) => ({ ...c, keyLimits: { ...c.keyLimits, k1: 1 }, pausedB: false })),
      workers: workersOf(fc.record({ skew: fc.constant(0), steps: fc.array(step, { minLength: 1, maxLength: 2 }) }), 2, Math.min(3, maxWorkers)),
    });
  });
}

/** 1–3 dead jobs and maybe a holder of i1; 2–3 workers replay the dead, enqueue with i1, claim what was replayed. */
function lifecycleRace(maxWorkers: number): fc.Arbitrary<Scenario> {
  const step: fc.Arbitrary<WorkerStep> = fc.oneof(
    { weight: 3, arbitrary: replayStep },
    { weight: 3, arbitrary: enqueueStep({ idempotencyKey: fc.constantFrom<string | null>("i1", "i1", "i1", "i2") }) },
    { weight: 2, arbitrary: claimStep() },
  );
  return fc.record({
    dead: fc.array(jobArb(fc.constant<JobStart>("dead")), { minLength: 1, maxLength: 3 }),
    // Mostly no holder, so that concurrent enqueues of i1 race to create it.
    holder: fc.oneof(
      { weight: 3, arbitrary: fc.constant(undefined) },
      { weight: 1, arbitrary: jobArb(fc.constantFrom<JobStart>("ready", "running-live", "dead")).map((j) => ({ ...j, idempotencyKey: "i1" })) },
    ),
    controls: controlsArb.map((c) => ({ ...c, pausedB: false })),
    workers: workersOf(fc.record({ skew: fc.constant(0), steps: fc.array(step, { minLength: 1, maxLength: 2 }) }), 2, Math.min(3, maxWorkers)),
  }).map(({ dead, holder, controls, workers }) => ({ jobs: oneHolderPerKey(holder ? [holder, ...dead] : dead), controls, workers }));
}

/**
 * A fair queue (qc): key f with 2–4 ready jobs, keys g and h with 1–2 each
 * (weight 1); 2–3 workers each claim one job at a time, one to three
 * times, and complete it or keep it. Claims must take the keys' places in
 * turn; concurrent claimers take different places.
 */
function fairnessRace(maxWorkers: number): fc.Arbitrary<Scenario> {
  const jobsOf = (key: string, min: number, max: number) =>
    fc.array(jobArb(fc.constant<JobStart>("ready"), { queue: fc.constant(2), key: fc.constant(null) }), { minLength: min, maxLength: max }).map((js) =>
      js.map((j) => ({ ...j, task: "t", idempotencyKey: null, rated: false, fairKey: key })),
    );
  const claimOne = fc.record({ kind: fc.constant("claim" as const), limit: fc.constant(1), outcome: fc.constantFrom<Outcome>("complete", "crash") });
  return fc.record({
    f: jobsOf("f", 2, 4),
    g: jobsOf("g", 1, 2),
    h: jobsOf("h", 1, 2),
    controls: controlsArb.map((c) => ({ ...c, capA: null, capU: null, pausedB: false })),
    workers: workersOf(fc.record({ skew: fc.constant(0), steps: fc.array(claimOne, { minLength: 1, maxLength: 3 }) }), 2, Math.min(3, maxWorkers)),
  }).map(({ f, g, h, controls, workers }) => ({ jobs: [...f, ...g, ...h], controls, workers }));
}

/**
 * The pending job of debounce key d1 (ready, in qc/t) set up, or not; 2–3
 * workers of 1–2 steps, each a debounced enqueue of d1 (delay 0: its job
 * is due at once) or a claim of one or two jobs (completed, failed, or
 * crashed): merges race claims of the pending job and the enqueues that
 * create the key's next one.
 */
function debounceRace(maxWorkers: number): fc.Arbitrary<Scenario> {
  const debounced = fc.constant<WorkerStep>({ kind: "enqueue", queue: 2, task: "t", key: null, priority: 0, idempotencyKey: null, debounce: true });
  const step = fc.oneof({ weight: 3, arbitrary: debounced }, { weight: 2, arbitrary: claimStep(fc.constantFrom<Outcome>("complete", "fail", "crash")) });
  const pending: JobSetup = { start: "ready", priority: 0, maxAttempts: 2, queue: 2, task: "t", key: null, idempotencyKey: null, debounced: true };
  return fc.record({
    jobs: fc.constantFrom<JobSetup[]>([pending], [pending], []),
    controls: controlsArb.map((c) => ({ ...c, capA: null, capU: null, rateA: null, pausedB: false })),
    workers: workersOf(fc.record({ skew: fc.constant(0), steps: fc.array(step, { minLength: 1, maxLength: 2 }) }), 2, Math.min(3, maxWorkers)),
  });
}

/**
 * Parents 0 and 1 (running under a lease, or ready; one attempt, so a
 * failure buries them) and child 2 waiting for both, maybe grandchild 3
 * waiting for 2; 2–3 workers: the first two hold a parent each and end it
 * (mostly complete) at once, the rest claim (released children) or cancel.
 */
function dependencyRace(maxWorkers: number): fc.Arbitrary<Scenario> {
  const plain = (start: JobStart): JobSetup => ({ start, priority: 0, maxAttempts: 1, queue: 2, task: "t", key: null, idempotencyKey: null });
  const parentStart = fc.constantFrom<JobStart>("running-live", "running-live", "running-live", "ready");
  const end = fc.constantFrom<Outcome>("complete", "complete", "complete", "fail");
  const other = fc.oneof(
    { weight: 3, arbitrary: claimStep(fc.constantFrom<Outcome>("complete", "fail", "crash")) },
    { weight: 1, arbitrary: cancelStep(fc.constantFrom(0, 2)) },
  );
  return fc.record({
    p0: parentStart,
    p1: parentStart,
    grandchild: fc.boolean(),
    e0: end,
    e1: end,
    others: fc.array(fc.record({ skew: fc.constant(0), steps: fc.array(other, { minLength: 1, maxLength: 2 }) }), { maxLength: Math.max(0, Math.min(3, maxWorkers) - 2) }),
    controls: controlsArb.map((c) => ({ ...c, capA: null, capU: null, rateA: null, pausedB: false })),
  }).map(({ p0, p1, grandchild, e0, e1, others, controls }) => ({
    jobs: [plain(p0), plain(p1), { ...plain("ready"), after: [0, 1] }, ...(grandchild ? [{ ...plain("ready"), after: [2] }] : [])],
    controls,
    workers: [
      { skew: 0, steps: [p0 === "ready" ? { kind: "claim" as const, limit: 1, outcome: e0 } : { kind: "hold" as const, job: 0, outcome: e0 }] },
      { skew: 0, steps: [p1 === "ready" ? { kind: "claim" as const, limit: 1, outcome: e1 } : { kind: "hold" as const, job: 1, outcome: e1 }] },
      ...others,
    ],
  }));
}
