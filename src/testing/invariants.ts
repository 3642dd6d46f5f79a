import type { JobRecord } from "./../core/job.ts";
import { JOB_STATES, SLOT_HOLDING_STATES } from "../core/states.ts";
import { applyJobOp, diffJob, isTerminal, toModelJob, type JobOp, type ModelJob } from "./model/model.ts";

/**
 * The recorded history of one concurrent run, and the invariants checked
 * against it and the database state afterwards.
 *
 * Times in a history are logical: one counter, incremented at every event,
 * in the single JavaScript thread. `a.end < b.start` therefore means "a's
 * result was back before b was called", i.e. a committed before b began.
 */
export type HistoryEvent = OperationEvent | HandlerEvent;

/** One adapter call, with `effects`, its per-job projection: what it did (or tried) to each job and what the adapter returned. */
export interface OperationEvent {
  readonly kind: "operation";
  readonly worker: string;
  /** "claim", "heartbeat", …, as labelled in the schedule. */
  readonly name: string;
  readonly label: string;
  readonly start: number;
  end: number;
  /**
   * When its first statement was released to the database (nothing it does
   * is visible before): a tighter lower bound than `start` for its effects.
   */
  firstStatement?: number;
  /**
   * When its last statement was released (the COMMIT, or the one
   * autocommitted statement): its writes are visible to other sessions no
   * earlier than this.
   */
  lastStatement?: number;
  /** For a claim: the limit asked for. */
  readonly limit?: number;
  /**
   * Per job written (or attempted): the op and what the adapter returned
   * (null: rejected). A call that answers only whether it wrote (a
   * heartbeat, `extendLeases`) sets `accepted` and leaves `result` null.
   */
  effects: { id: number; op: JobOp; result: JobRecord | null; accepted?: boolean }[];
  /** When the call threw. */
  error?: string;
  /**
   * Admission this call may have done as a side effect, unrecorded per job:
   * a claim stages every due scheduled job ("all"); an accepted write that
   * frees a slot, and a keyed enqueue, rebalance their keys. L1 lets such a
   * move (stage, stageBlocked, unblock at `now`) happen inside the call.
   */
  admits?: { now: number; keys: "all" | string[] };
  /** For an enqueue: the records it created (their state is the admission's decision). */
  created?: JobRecord[];
  /**
   * For an enqueue: per job asked for, its idempotency key, the id returned, whether this call created it, and the key the
   * returned row holds; for a debounced one, its debounce key and payload.
   */
  enqueued?: { idempotencyKey: string | null; id: number; created: boolean; heldKey: string | null; debounceKey?: string; payload?: string }[];
  /** For a queue control change: what it set. */
  control?: { queue: string; paused: boolean };
}

/** A handler run: it starts after its claim returned and ends before its outcome is written. */
export interface HandlerEvent {
  readonly kind: "handler";
  readonly worker: string;
  readonly id: number;
  readonly leaseToken: string;
  /** True for a run that began before the recorded phase (a worker, possibly a zombie, holding a lease from setup). */
  readonly resumed: boolean;
  readonly start: number;
  end: number;
  /** Whether the outcome the handler wrote (complete/fail/release) was accepted. */
  outcomeAccepted: boolean | null;
}

export interface RunRecord {
  /** Every job's row just before the concurrent phase. */
  readonly initial: readonly JobRecord[];
  /** Every job's row after the run. */
  readonly final: readonly JobRecord[];
  readonly history: readonly HistoryEvent[];
  /** The key limits and caps, fixed for the whole run, and the queues paused at its start. */
  readonly limits?: RunLimits;
  /** The setup's dependencies (EnqueueOptions.after): each child with its parents, by id. */
  readonly dependencies?: readonly { readonly child: number; readonly parents: readonly number[] }[];
}

export interface RunLimits {
  readonly keys: Readonly<Record<string, number>>;
  readonly queueCaps: Readonly<Record<string, number>>;
  readonly taskCaps: Readonly<Record<string, number>>;
  readonly pausedAtStart: readonly string[];
  /** Rate limits whose window spans the whole run (set after the setup): at most this many claims of each start a job in the run. */
  readonly rates?: { readonly queues: Readonly<Record<string, number>>; readonly keys: Readonly<Record<string, number>> };
}

/** One named check. Returns human-readable violations (empty when it holds). */
export interface Invariant {
  /** "I1", "I6", … as in docs/design.md (Invariants), or "S1" for a schema/row rule. */
  readonly id: string;
  readonly name: string;
  check(run: RunRecord): string[];
}

const operations = (run: RunRecord) => run.history.filter((e): e is OperationEvent => e.kind === "operation");
const handlers = (run: RunRecord) => run.history.filter((e): e is HandlerEvent => e.kind === "handler");

/** Row rules: every stored row is internally consistent. */
export const rowInvariants: Invariant[] = [
  {
    id: "S1",
    name: "state is a known state; a running job holds a lease, any other job holds none",
    check: (run) =>
      run.final.flatMap((j) => {
        if (!JOB_STATES.includes(j.state)) return [`job #${j.id} has unknown state ${j.state}`];
        const leased = j.leaseToken !== null && j.leaseExpiresAt !== null;
        const unleased = j.leaseToken === null && j.leaseExpiresAt === null;
        if (j.state === "running" ? !leased : !unleased) return [`job #${j.id} is ${j.state} with lease ${j.leaseToken}/${j.leaseExpiresAt}`];
        return [];
      }),
  },
  {
    id: "S2",
    name: "a job is finished (finished_at set) exactly when it is terminal; 0 <= attempt <= max_attempts",
    check: (run) =>
      run.final.flatMap((j) => {
        const out: string[] = [];
        if (isTerminal(j.state) !== (j.finishedAt !== null)) out.push(`job #${j.id} is ${j.state} with finished_at ${j.finishedAt}`);
        if (j.attempt < 0 || j.attempt > j.maxAttempts) out.push(`job #${j.id} has attempt ${j.attempt} of ${j.maxAttempts}`);
        return out;
      }),
  },
];

/** History rules. */
export const historyInvariants: Invariant[] = [
  {
    id: "I0",
    name: "no operation throws",
    check: (run) => operations(run).flatMap((o) => (o.error === undefined ? [] : [`${o.label} threw: ${o.error}`])),
  },
  {
    id: "C1",
    name: "a claim returns at most `limit` jobs, each at most once",
    check: (run) =>
      operations(run).flatMap((o) => {
        if (o.limit === undefined) return [];
        const ids = o.effects.map((e) => e.id);
        const out: string[] = [];
        if (ids.length > o.limit) out.push(`${o.label} claimed ${ids.length} jobs [${ids.join(",")}] with limit ${o.limit}`);
        if (new Set(ids).size !== ids.length) out.push(`${o.label} returned a job twice: [${ids.join(",")}]`);
        return out;
      }),
  },
  {
    id: "I1",
    name: "single owner: two overlapping handler runs of one job never both get their outcome accepted",
    check: (run) => {
      const hs = handlers(run).filter((h) => h.outcomeAccepted === true);
      const out: string[] = [];
      for (let i = 0; i < hs.length; i++) {
        for (let k = i + 1; k < hs.length; k++) {
          const a = hs[i]!;
          const b = hs[k]!;
          if (a.id === b.id && a.start < b.end && b.start < a.end) {
            out.push(`job #${a.id}: ${a.worker} (lease ${a.leaseToken}) and ${b.worker} (lease ${b.leaseToken}) ran at once and both outcomes were accepted`);
          }
        }
      }
      return out;
    },
  },
  {
    id: "I6",
    name: "once: a job's terminal transition is accepted at most once per run it is given (the first, and one after each accepted replay)",
    check: (run) => {
      const count = new Map<number, string[]>();
      const replays = new Map<number, number>();
      for (const o of operations(run)) {
        for (const e of o.effects) {
          if (e.result === null) continue;
          if (e.op.kind === "replay") replays.set(e.id, (replays.get(e.id) ?? 0) + 1);
          else if (isTerminal(e.result.state)) count.set(e.id, [...(count.get(e.id) ?? []), o.label]);
        }
      }
      return [...count]
        .filter(([id, l]) => l.length > 1 + (replays.get(id) ?? 0))
        .map(([id, l]) => `job #${id} finished ${l.length} times after ${replays.get(id) ?? 0} replay(s): ${l.join("; ")}`);
    },
  },
  {
    id: "I8",
    name: "idempotency: one job per key (nothing releases a key during a run); every enqueue with the key returns that job, created by at most one call",
    check: (run) => {
      const out: string[] = [];
      const holders = new Map<string, number[]>();
      for (const j of run.final) if (j.idempotencyKey !== null) holders.set(j.idempotencyKey, [...(holders.get(j.idempotencyKey) ?? []), j.id]);
      for (const [key, ids] of holders) if (ids.length > 1) out.push(`key ${key} is held by ${ids.length} jobs [${ids.join(",")}]`);
      const setupHolder = new Map(run.initial.filter((j) => j.idempotencyKey !== null).map((j) => [j.idempotencyKey!, j.id]));
      const creators = new Map<string, string[]>();
      for (const o of operations(run)) {
        for (const e of o.enqueued ?? []) {
          if (e.idempotencyKey === null) continue;
          const holder = holders.get(e.idempotencyKey)?.[0];
          if (e.id !== holder) out.push(`${o.label} returned job #${e.id}, but key ${e.idempotencyKey} is held by #${holder ?? "nobody"}`);
          if (e.heldKey !== e.idempotencyKey) out.push(`${o.label} returned job #${e.id} holding key ${e.heldKey}, not ${e.idempotencyKey}`);
          if (e.created) creators.set(e.idempotencyKey, [...(creators.get(e.idempotencyKey) ?? []), o.label]);
        }
      }
      for (const [key, labels] of creators) {
        if (labels.length > 1) out.push(`key ${key} was created by ${labels.length} enqueues: ${labels.join("; ")}`);
        if (setupHolder.has(key)) out.push(`key ${key}, held by #${setupHolder.get(key)} before the run, was created again by ${labels.join("; ")}`);
      }
      return out;
    },
  },
  {
    id: "I9",
    name: "replay: a dead job is re-enqueued once per time it died, however many replays race (each needs it dead again)",
    check: (run) => {
      const out: string[] = [];
      const replays = new Map<number, string[]>();
      const deaths = new Map<number, number>();
      for (const j of run.initial) if (j.state === "dead") deaths.set(j.id, 1);
      for (const o of operations(run)) {
        for (const e of o.effects) {
          if (e.result === null) continue;
          if (e.op.kind === "replay") replays.set(e.id, [...(replays.get(e.id) ?? []), o.label]);
          else if (e.result.state === "dead") deaths.set(e.id, (deaths.get(e.id) ?? 0) + 1);
        }
      }
      for (const [id, labels] of replays) {
        const died = deaths.get(id) ?? 0;
        if (labels.length > died) out.push(`job #${id} was replayed ${labels.length} times (${labels.join("; ")}) but was dead only ${died} time(s)`);
      }
      return out;
    },
  },
  {
    id: "L1",
    name: "linearizable: per job, some sequential order of the accepted and rejected writes, consistent with real time, explains every result and the final row",
    check: (run) => [
      ...run.initial.flatMap((j) => linearizeJob(j, run)),
      // A job enqueued during the run starts from the row its enqueue returned (admitted, blocked or discarded).
      ...operations(run).flatMap((o) => (o.created ?? []).flatMap((j) => linearizeJob(j, run, o.start))),
    ],
  },
];

const SLOT_HOLDERS: readonly string[] = SLOT_HOLDING_STATES;

/**
 * The earliest logical time another session can see an operation's writes:
 * the release of its last statement (its COMMIT, or its one autocommitted
 * statement). Assumes the adapter's transactions (the no-transactions
 * mutation breaks it, on purpose).
 */
const effectsFrom = (o: OperationEvent) => o.lastStatement ?? o.firstStatement ?? o.start;

/**
 * Jobs definitely running at logical time `t`: returned by a claim that
 * ended by `t` (or running at the start), and no accepted write that could
 * have ended that run (complete, fail, release, expire, cancel, with any
 * token) could be visible by `t` (see `effectsFrom`). Conservative: a job counted here was running at
 * `t` in every linearization.
 */
function runningAt(run: RunRecord, t: number): JobRecord[] {
  const ops = operations(run);
  const leaving = (id: number, after: number) =>
    ops.some((o) => o.end > after && effectsFrom(o) <= t && o.effects.some((e) => e.id === id && e.op.kind !== "claim" && e.op.kind !== "heartbeat" && e.op.kind !== "recordStep" && e.result !== null));
  const out = new Map<number, JobRecord>();
  for (const j of run.initial) if (j.state === "running" && !leaving(j.id, 0)) out.set(j.id, j);
  for (const o of ops) {
    if (o.name !== "claim" || o.end > t) continue;
    for (const e of o.effects) if (e.result !== null && !leaving(e.id, o.start)) out.set(e.id, e.result);
  }
  return [...out.values()];
}

/** At every claim's end, the jobs definitely running, grouped by `group`, never exceed `limitOf`. */
function neverAbove(run: RunRecord, what: string, group: (j: JobRecord) => string | null, limitOf: (g: string) => number | undefined): string[] {
  const out: string[] = [];
  for (const c of operations(run)) {
    if (c.name !== "claim" || c.error !== undefined || c.effects.length === 0) continue;
    const counts = new Map<string, number[]>();
    for (const j of runningAt(run, c.end)) {
      const g = group(j);
      if (g !== null) counts.set(g, [...(counts.get(g) ?? []), j.id]);
    }
    for (const [g, ids] of counts) {
      const limit = limitOf(g);
      if (limit !== undefined && ids.length > limit && c.effects.some((e) => ids.includes(e.id))) {
        out.push(`when ${c.label} returned, ${what} ${JSON.stringify(g)} had ${ids.length} running jobs [${ids.join(",")}], limit ${limit}`);
      }
    }
  }
  return out;
}

/** Concurrency keys, caps and pause: cross-job rules, checked on the whole history and the final rows. */
export const controlInvariants: Invariant[] = [
  {
    id: "I2",
    name: "per key, admitted (ready + running) jobs never exceed the limit after the run, and no claim makes running jobs exceed it",
    check: (run) => {
      const keys = run.limits?.keys;
      if (!keys) return [];
      const out: string[] = [];
      for (const [key, limit] of Object.entries(keys)) {
        const holders = run.final.filter((j) => j.concurrencyKey === key && SLOT_HOLDERS.includes(j.state));
        if (holders.length > limit) out.push(`key ${key} ends with ${holders.length} admitted jobs [${holders.map((j) => `#${j.id} ${j.state}`).join(", ")}], limit ${limit}`);
      }
      return [...out, ...neverAbove(run, "key", (j) => j.concurrencyKey, (k) => keys[k])];
    },
  },
  {
    id: "I3",
    name: "per queue and per task cap: running jobs never exceed the cap after the run, nor when any claim returns (the union of concurrent claims included)",
    check: (run) => {
      const l = run.limits;
      if (!l) return [];
      const out: string[] = [];
      for (const [queue, cap] of Object.entries(l.queueCaps)) {
        const n = run.final.filter((j) => j.queue === queue && j.state === "running").length;
        if (n > cap) out.push(`queue ${queue} ends with ${n} running jobs, cap ${cap}`);
      }
      for (const [task, cap] of Object.entries(l.taskCaps)) {
        const n = run.final.filter((j) => j.task === task && j.state === "running").length;
        if (n > cap) out.push(`task ${task} ends with ${n} running jobs, cap ${cap}`);
      }
      return [...out, ...neverAbove(run, "queue", (j) => j.queue, (q) => l.queueCaps[q]), ...neverAbove(run, "task", (j) => j.task, (t) => l.taskCaps[t])];
    },
  },
  {
    id: "I4",
    name: "no lost wakeup (I4/I10): after the run, no job is blocked while its key has room",
    check: (run) => {
      const keys = run.limits?.keys;
      if (!keys) return [];
      const out: string[] = [];
      for (const [key, limit] of Object.entries(keys)) {
        const mine = run.final.filter((j) => j.concurrencyKey === key);
        const holders = mine.filter((j) => SLOT_HOLDERS.includes(j.state)).length;
        const blocked = mine.filter((j) => j.state === "blocked");
        if (blocked.length > 0 && holders < limit) out.push(`key ${key} (limit ${limit}) ends with ${holders} admitted and blocked [${blocked.map((j) => `#${j.id}`).join(", ")}]`);
      }
      return out;
    },
  },
  {
    id: "I12",
    name: "rate limits: the jobs claims start within a window (here the whole run) never exceed its limit, concurrent claims included",
    check: (run) => {
      const rates = run.limits?.rates;
      if (!rates) return [];
      const started = operations(run)
        .filter((o) => o.error === undefined)
        .flatMap((o) => o.effects.filter((e) => e.op.kind === "claim" && e.result !== null && e.result !== undefined).map((e) => ({ job: e.result!, by: o.label })));
      const out: string[] = [];
      const over = (what: string, limit: number, mine: typeof started) => {
        if (mine.length > limit) out.push(`${what} started ${mine.length} jobs in one window [${mine.map((s) => `#${s.job.id} by ${s.by}`).join(", ")}], limit ${limit}`);
      };
      for (const [queue, limit] of Object.entries(rates.queues)) over(`queue ${queue}`, limit, started.filter((s) => s.job.queue === queue));
      for (const [key, limit] of Object.entries(rates.keys)) over(`rate key ${key}`, limit, started.filter((s) => s.job.rateKey === key));
      return out;
    },
  },
  {
    id: "I14",
    name: "debounce: an enqueue never merges into a job already claimed, never creates a second pending job of its key, and a claim runs the last merge before it",
    check: (run) => {
      const ops = operations(run).filter((o) => o.error === undefined);
      const claims = ops.flatMap((o) => o.effects.filter((e) => e.op.kind === "claim" && e.result).map((e) => ({ op: o, job: e.result! })));
      // A debounced job set up pending counts as created before the run by a "setup" enqueue.
      const setup = { label: "setup", start: -1, end: 0 } as OperationEvent;
      const debounced = [
        ...run.initial.filter((j) => j.debounceKey !== null).map((j) => ({ op: setup, id: j.id, created: true, debounceKey: j.debounceKey!, payload: j.payload })),
        ...ops.flatMap((o) => (o.enqueued ?? []).filter((e) => e.debounceKey !== undefined).map((e) => ({ op: o, ...e }))),
      ];
      const claimsOf = (id: number) => claims.filter((c) => c.job.id === id);
      const out: string[] = [];
      for (const e of debounced) {
        // A claim that committed before this enqueue began had taken the job out of pending.
        const before = claimsOf(e.id).find((c) => c.op.end < e.op.start);
        if (!e.created && before) out.push(`${e.op.label} merged into #${e.id}, which ${before.op.label} had claimed before it began: the merge is lost`);
      }
      const created = debounced.filter((e) => e.created);
      for (const a of created) {
        for (const b of created) {
          if (a === b || a.debounceKey !== b.debounceKey || !(a.op.end < b.op.start)) continue;
          // #a was pending when b began; unless a claim took it before b ended, both were pending at once.
          if (!claimsOf(a.id).some((c) => c.op.start < b.op.end)) out.push(`${a.op.label} created #${a.id} and ${b.op.label} created #${b.id} while #${a.id} was still pending (key ${a.debounceKey})`);
        }
      }
      for (const c of claims) {
        const mine = debounced.filter((e) => e.id === c.job.id && e.payload !== undefined);
        if (mine.length === 0) continue;
        const source = mine.find((e) => e.payload === c.job.payload);
        // A merge that ended before the claim began, and began after the enqueue whose payload the claim returned ended, was lost.
        const lost = source && mine.find((e) => e !== source && source.op.end < e.op.start && e.op.end < c.op.start);
        if (!source) out.push(`${c.op.label} returned #${c.job.id} with a payload no enqueue of it gave`);
        else if (lost) out.push(`${c.op.label} returned #${c.job.id} with ${source.op.label}'s payload, though ${lost.op.label} merged after it and before the claim`);
      }
      const pending = run.final.filter((j) => j.debounceKey !== null && (j.state === "scheduled" || j.state === "ready"));
      for (const key of new Set(pending.map((j) => `${j.queue}/${j.task}/${j.debounceKey}`))) {
        const mine = pending.filter((j) => `${j.queue}/${j.task}/${j.debounceKey}` === key);
        if (mine.length > 1) out.push(`debounce key ${key} ends with ${mine.length} pending jobs [${mine.map((j) => `#${j.id}`).join(", ")}]`);
      }
      return out;
    },
  },
  {
    id: "P1",
    name: "pause: no claim returns a job of a queue that was paused before the claim started (and not resumed before it ended)",
    check: (run) => {
      const l = run.limits;
      if (!l) return [];
      const ops = operations(run);
      const out: string[] = [];
      for (const c of ops) {
        if (c.name !== "claim") continue;
        for (const e of c.effects) {
          const queue = e.result?.queue;
          if (queue === undefined) continue;
          const resumed = ops.some((o) => o.name === "resume" && o.error === undefined && o.control?.queue === queue && effectsFrom(o) < c.end);
          if (resumed) continue;
          const pausedBy = l.pausedAtStart.includes(queue) ? "the setup" : ops.find((o) => o.name === "pause" && o.error === undefined && o.control?.queue === queue && o.end < (c.firstStatement ?? c.start))?.label;
          if (pausedBy) out.push(`${c.label} returned job #${e.id} of queue ${queue}, paused by ${pausedBy}`);
        }
      }
      return out;
    },
  },
];

/**
 * Fair sharing (I13, R21), judged on runs whose claims each take at most one
 * job of a fair queue whose keys (weight 1) all had their jobs ready from
 * the start, enqueued in one batch, so that each key's n-th job has the
 * n-th place of every key (the schedules' fairness family):
 * - a claim comes back empty only when every key that still had a ready job
 *   (counting the jobs returned by claims that had begun before it ended)
 *   was being served by a claim that overlapped it;
 * - a claim never takes a key's job past a place another key still had
 *   free: when it took key K's job, K having had s jobs taken by claims
 *   that ended before it began, no other key K' with s' such jobs had more
 *   than s' + o jobs (o: the claims that overlapped it and returned a job
 *   of K', or nothing, each of which may have held one of K''s places)
 *   while s > s' + o. Claims that ignore the places serve the first key's
 *   jobs first.
 * (A job taken twice, after its lease ran out, or a fair job a rate limit
 * may hold back, makes the second check stand down.)
 */
export const fairnessInvariants: Invariant[] = [
  {
    id: "I13",
    name: "fair sharing: claims serve the keys' places in turn, and come back empty only while every key with ready jobs (none a rate limit holds) is being served by an overlapping claim",
    check: (run) => {
      // Jobs a rate limit may hold back (a rate key, a rate-limited queue) are left out: an empty claim may be the limit's.
      const rated = run.limits?.rates;
      const heldByRate = (j: { rateKey: string | null; queue: string }) => j.rateKey !== null || rated?.queues[j.queue] !== undefined;
      const keyed = run.initial.filter((j) => j.fairKey !== null && j.state === "ready" && !heldByRate(j));
      if (keyed.length === 0) return [];
      const rateHeld = run.initial.some((j) => j.fairKey !== null && heldByRate(j));
      const claims = operations(run).filter((o) => o.name === "claim" && o.error === undefined);
      if (claims.some((c) => (c.limit ?? 1) > 1)) return [];
      const initial = new Map(run.initial.map((j) => [j.id, j]));
      const keyOf = (id: number) => {
        const j = initial.get(id);
        return j && j.fairKey !== null ? `${j.queue}/${j.fairKey}` : null;
      };
      const ready = new Map<string, number>();
      for (const j of keyed) ready.set(`${j.queue}/${j.fairKey}`, (ready.get(`${j.queue}/${j.fairKey}`) ?? 0) + 1);
      const out: string[] = [];
      const returned = claims.flatMap((c) => c.effects.filter((e) => e.result !== null).map((e) => e.id));
      const once = new Set(returned).size === returned.length;
      for (const c of claims) {
        const overlapping = claims.filter((d) => d !== c && d.start < c.end && d.end > c.start);
        if (c.effects.every((e) => e.result === null)) {
          const served = new Set<string>();
          const before = new Map<string, number>();
          for (const d of claims) {
            for (const f of d.effects) {
              const dk = f.result ? keyOf(f.id) : null;
              if (dk === null) continue;
              if (overlapping.includes(d)) served.add(dk);
              if ((d.firstStatement ?? d.start) < c.end) before.set(dk, (before.get(dk) ?? 0) + 1);
            }
          }
          const waiting = [...ready].filter(([k, n]) => n > (before.get(k) ?? 0) && !served.has(k)).map(([k]) => k);
          if (waiting.length > 0) out.push(`${c.label} returned nothing while ${waiting.join(", ")} had ready jobs no overlapping claim served`);
          continue;
        }
        const took = c.effects.map((e) => (e.result ? keyOf(e.id) : null)).find((k) => k !== null);
        // Places are counted per key among all its jobs: a job a rate limit may hold back makes the count stand down.
        if (!once || took === undefined || took === null || rateHeld) continue;
        const done = new Map<string, number>();
        for (const d of claims) {
          if (d.end >= c.start) continue;
          for (const f of d.effects) {
            const dk = f.result ? keyOf(f.id) : null;
            if (dk !== null) done.set(dk, (done.get(dk) ?? 0) + 1);
          }
        }
        const s = done.get(took) ?? 0;
        const [queue] = took.split("/");
        for (const [other, n] of ready) {
          if (other === took || other.split("/")[0] !== queue) continue;
          const s2 = done.get(other) ?? 0;
          // The overlapping claims that may have held a place of `other`: those that returned one of its jobs, or nothing.
          const o = overlapping.filter((d) => d.effects.every((e) => e.result === null) || d.effects.some((e) => e.result !== null && keyOf(e.id) === other)).length;
          if (s > s2 + o && n > s2 + o) out.push(`${c.label} took job ${s + 1} of ${took} while ${other} (${s2} taken, ${o} overlapping claims that may hold its places) still had job ${s2 + o + 1} of ${n} in an earlier place`);
        }
      }
      return out;
    },
  },
];

/** Every invariant the implemented features cover. Later features append theirs. */
/**
 * Dependencies (I15, R23), judged on the final rows of the setup's children:
 * a child whose parents all succeeded has been released (it is not
 * waiting); a child of a parent that ended dead or cancelled is cancelled
 * (it never ran), unless it had been released before; a child that ran
 * (its attempt grew) has only succeeded parents; a child of an unfinished
 * parent still waits, unless cancelled.
 */
export const dependencyInvariants: Invariant[] = [
  {
    id: "I15",
    name: "dependencies: a child is released once its parents all succeeded, cancelled when one ended dead or cancelled, and never runs before",
    check: (run) => {
      const out: string[] = [];
      const row = (id: number) => run.final.find((r) => r.id === id) ?? null;
      for (const { child, parents } of run.dependencies ?? []) {
        const c = row(child);
        const ps = parents.map(row);
        if (!c || ps.some((p) => p === null)) continue;
        const states = ps.map((p) => p!.state);
        const ran = c.attempt > (run.initial.find((r) => r.id === child)?.attempt ?? 0);
        const desc = `child #${child} (${c.state}, parents ${parents.map((p, k) => `#${p} ${states[k]}`).join(", ")})`;
        if (states.every((st) => st === "succeeded") && c.state === "waiting") out.push(`${desc}: every parent succeeded but it still waits (never released)`);
        if (states.some((st) => st === "dead" || st === "cancelled") && c.state === "waiting") out.push(`${desc}: a parent ended but it still waits (not cancelled)`);
        if (ran && !states.every((st) => st === "succeeded")) out.push(`${desc}: it ran, but not every parent succeeded (released early)`);
        if (states.some((st) => !isTerminal(st)) && !["waiting", "cancelled"].includes(c.state)) out.push(`${desc}: a parent is unfinished but it left waiting (released early)`);
      }
      return out;
    },
  },
];

export const allInvariants: Invariant[] = [...rowInvariants, ...historyInvariants, ...controlInvariants, ...fairnessInvariants, ...dependencyInvariants];

/** Runs `invariants` on a run: one line per violation, prefixed by the invariant's id. */
export function checkInvariants(run: RunRecord, invariants: readonly Invariant[] = allInvariants): string[] {
  return invariants.flatMap((inv) => inv.check(run).map((v) => `${inv.id} (${inv.name}): ${v}`));
}

/** What a step returned, for messages: the state it wrote, whether it was accepted, or null. */
function shown(s: Step): string {
  if (s.accepted !== undefined) return s.accepted ? "accepted" : "rejected";
  return s.result === null ? "null" : s.result.state;
}

interface Step {
  label: string;
  start: number;
  end: number;
  op: JobOp;
  result: JobRecord | null;
  accepted?: boolean;
}

/** A call that may have admitted the job as a side effect, at `now`, somewhere inside [start, end]. */
interface AdmitSource {
  label: string;
  start: number;
  end: number;
  now: number;
}

/** The concurrent schedules enqueue keys with onConflict "block" only, so stageDiscard never happens there. */
const ADMIT_KINDS = ["stage", "stageBlocked", "unblock"] as const;

/**
 * Wing & Gong style search for one job: place the steps one at a time (a step
 * may go next only if no unplaced step ended before it started), applying the
 * reference model; each step's observed result must equal the model's, and
 * the final model row must equal the stored row. Admission moves (stage,
 * stageBlocked, unblock) are unobserved side effects of other calls: between
 * steps, the search may apply one at the `now` of a call that could have done
 * it, if that call's interval fits the real-time order of the placed steps.
 * Whether the move respected the key's limit is a cross-job question: I2/I4.
 */
function linearizeJob(initial: JobRecord, run: RunRecord, floor = 0): string[] {
  const steps: Step[] = [];
  const sources: AdmitSource[] = [];
  for (const o of operations(run)) {
    if (o.error !== undefined) continue;
    for (const e of o.effects) if (e.id === initial.id) steps.push({ label: o.label, start: o.start, end: o.end, op: e.op, result: e.result, accepted: e.accepted });
    const a = o.admits;
    if (a && o.end > floor && (a.keys === "all" || (initial.concurrencyKey !== null && a.keys.includes(initial.concurrencyKey)))) {
      sources.push({ label: o.label, start: o.start, end: o.end, now: a.now });
    }
  }
  const finalRow = run.final.find((r) => r.id === initial.id) ?? null;
  const finalModel = finalRow === null ? null : toModelJob(finalRow);
  const child = run.dependencies?.some((d) => d.child === initial.id) ?? false;
  /** Calls that may have ended one of its parents (and so settled it), with their `now`: the settling of children (I15). */
  const parentEnds: AdmitSource[] = [];
  if (child) {
    for (const o of operations(run)) {
      if (o.error !== undefined || o.end <= floor) continue;
      const now = o.effects.find((e) => e.op.now !== undefined)?.op.now ?? o.admits?.now;
      if (now !== undefined) parentEnds.push({ label: o.label, start: o.start, end: o.end, now });
    }
  }
  if (steps.length > 16) return [`job #${initial.id}: ${steps.length} steps, too many to check`];
  const seen = new Set<string>();
  const start = toModelJob(initial);
  let closest: { order: string[]; why: string } = { order: [], why: "no step can go first" };
  const search = (job: ModelJob, placed: number, order: string[]): boolean => {
    if (placed === (1 << steps.length) - 1) {
      const d = diffJob(job, finalModel);
      if (d.length === 0) return true;
      if (order.length >= closest.order.length) closest = { order, why: `final row differs: ${d.join("; ")}` };
      // fall through: an admission move may still explain the final row
    }
    const key = `${placed}|${JSON.stringify(job)}`;
    if (seen.has(key)) return false;
    seen.add(key);
    for (let i = 0; i < steps.length; i++) {
      if (placed & (1 << i)) continue;
      const s = steps[i]!;
      let blocked = false;
      for (let k = 0; k < steps.length && !blocked; k++) if (!(placed & (1 << k)) && k !== i && steps[k]!.end < s.start) blocked = true;
      if (blocked) continue;
      const next = applyJobOp(job, s.op);
      const expected = next;
      const d =
        s.accepted === undefined
          ? diffJob(expected, s.result === null ? null : toModelJob(s.result))
          : (expected !== null) === s.accepted
            ? []
            : [`model ${expected === null ? "rejects" : "accepts"} it`];
      if (d.length > 0) {
        if (order.length >= closest.order.length) closest = { order: [...order, s.label], why: `${s.label} returned ${shown(s)}, model: ${d.join("; ")}` };
        continue;
      }
      if (search(next ?? job, placed | (1 << i), [...order, s.label])) return true;
    }
    if (child && job.state === "waiting") {
      // A parent's end settles its waiting children inside that call: a drop of the count (updatedAt), the release,
      // or the cascade's cancel (its reason as the final row has it). Which parent, and when, is I15's question.
      let placedStart = floor;
      for (let k = 0; k < steps.length; k++) if (placed & (1 << k)) placedStart = Math.max(placedStart, steps[k]!.start);
      for (const src of parentEnds) {
        if (src.end < placedStart) continue;
        let blocked = false;
        for (let k = 0; k < steps.length && !blocked; k++) if (!(placed & (1 << k)) && steps[k]!.end < src.start) blocked = true;
        if (blocked) continue;
        const moves: [string, ModelJob | null][] = [
          ["count drop", job.updatedAt === src.now ? null : { ...job, updatedAt: src.now }],
          ["unwait", applyJobOp(job, { kind: "unwait", now: src.now })],
          ["cancel by parent", applyJobOp(job, { kind: "cancel", now: src.now, reason: finalRow?.lastError ?? "" })],
        ];
        for (const [what, next] of moves) if (next !== null && search(next, placed, [...order, `(${what} in ${src.label})`])) return true;
      }
    }
    if (job.state !== "scheduled" && job.state !== "blocked") return false;
    let latestStart = floor;
    for (let k = 0; k < steps.length; k++) if (placed & (1 << k)) latestStart = Math.max(latestStart, steps[k]!.start);
    for (const src of sources) {
      if (src.end < latestStart) continue;
      let blocked = false;
      for (let k = 0; k < steps.length && !blocked; k++) if (!(placed & (1 << k)) && steps[k]!.end < src.start) blocked = true;
      if (blocked) continue;
      for (const kind of ADMIT_KINDS) {
        const next = applyJobOp(job, { kind, now: src.now });
        if (next !== null && search(next, placed, [...order, `(${kind} in ${src.label})`])) return true;
      }
    }
    return false;
  };
  if (search(start, 0, [])) return [];
  return [
    `job #${initial.id} (initially ${initial.state}${initial.leaseToken ? ` lease ${initial.leaseToken}` : ""}): no sequential order explains its ${steps.length} writes. ` +
      `Longest explainable prefix: [${closest.order.join(" → ")}]; then ${closest.why}. Writes: ${steps
        .map((s) => `${s.label}@[${s.start},${s.end}]→${shown(s)}`)
        .join(", ")}`,
  ];
}
