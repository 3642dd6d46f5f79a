/**
 * Recurring jobs, the service (`docket.schedules`, `docket.scheduler()`):
 * storing schedules, and the pass that fires each due tick once however
 * many schedulers run. The tick arithmetic is core policy (src/core/schedules.ts).
 */
import type { Cron } from "croner";
import type { DocketAdapter, NewJob, StoredSchedule } from "../core/adapter.ts";
import { ClosedError, InvalidArgumentError, NotFoundError } from "../core/errors.ts";
import { toJob, type Job, type TaskMap } from "../core/job.ts";
import { firstTick, latestTick, missedTicks, nextTick, parseCron, type FiredTick, type Schedule, type ScheduleDefinition, type ScheduleJobOptions } from "../core/schedules.ts";
import { shown } from "../core/shown.ts";
import { oneLine } from "../core/unsafe-text.ts";
import { checkKeys, validateInteger, validateName } from "../core/validate.ts";
import type { EnqueueHost } from "./enqueue.ts";

/**
 * A schedule definition whose task is one of T's, with that task's payload:
 * required unless the payload type admits null (a tick of a schedule without
 * one enqueues null). With an untyped Docket, any task and payload.
 */
export type TaskScheduleDefinition<T extends TaskMap, K extends keyof T & string = keyof T & string> = {
  [P in K]: Omit<ScheduleDefinition<T[P]>, "task" | "payload"> & { task: P } & (null extends T[P] ? { payload?: T[P] } : { payload: T[P] });
}[K];

/** What a Docket gives its schedules: its adapter, clock, and job validation (the same as enqueue's). */
export interface ScheduleHost {
  readonly adapter: DocketAdapter;
  readonly clock: { now(): number };
  prepareJob(item: { task: string; payload: unknown; options?: ScheduleJobOptions & { runAt?: number } }, now: number): NewJob;
  /** Throws PayloadTooLargeError when the database cannot store `payload` (JSON text within maxPayloadBytes). */
  checkStorable(payload: string): void | Promise<void>;
  announceScheduled(job: Job): void;
  /** Runs `store`, the write of one job a schedule fires, in the docket's producer span (EnqueueTracing), the job carrying its context; absent: as it is. */
  traced?<R>(job: NewJob, store: (job: NewJob) => Promise<R>): Promise<R>;
}

const OPTION_KEYS = ["queue", "priority", "maxAttempts", "timeoutMs"];

/**
 * A docket's schedules: jobs validated as enqueue validates them, payloads
 * checked against the database's limit, and a fired tick announced as an
 * enqueue is (wake-up when ready, `enqueued` event).
 */
export function docketSchedules<T extends TaskMap>(host: Pick<EnqueueHost, "adapter" | "clock" | "tasks" | "payloadLimit" | "bus" | "tracing">): Schedules<T> {
  const { adapter, clock, tasks, payloadLimit, bus, tracing } = host;
  return new Schedules({
    adapter,
    clock: { now: () => clock.now() },
    prepareJob: (item, now) => tasks.newJob(item, now, ""),
    checkStorable: (payload) => payloadLimit.check([payload]),
    announceScheduled: (job) => {
      if (job.state === "ready") bus.tellEnqueued(new Set([job.queue]), false);
      if (bus.events.wants("enqueued")) bus.events.emit({ type: "enqueued", at: clock.now(), job });
    },
    traced: (job, store) => (tracing === null ? store(job) : tracing.enqueue([job], (traceContext) => store(traceContext === null ? job : { ...job, traceContext }))),
  });
}

/**
 * Recurring jobs (see Docket.schedules). Missed ticks: a pass enqueues the
 * latest tick that is due and not yet fired; older missed ticks (while no
 * scheduler ran) are skipped, so downtime yields one catch-up job per
 * schedule, not one per missed tick. Each tick fires at most once, however
 * many schedulers run (the database decides: see DocketAdapter.fireSchedule).
 */
export class Schedules<T extends TaskMap = TaskMap> {
  /** Parsed expressions by `cron` and time zone: a pass (every second per scheduler) parses each one once per process. */
  readonly #parsed = new Map<string, Cron>();

  constructor(readonly host: ScheduleHost) {}

  #cron(cron: string, timezone: string): Cron {
    const key = `${timezone}\u0000${cron}`;
    let parsed = this.#parsed.get(key);
    if (parsed === undefined) this.#parsed.set(key, (parsed = parseCron(cron, timezone)));
    return parsed;
  }

  /**
   * Creates or replaces the schedule `name`. A new or changed schedule fires
   * from its next tick on, never for ticks before this call. The same
   * definition put again (as every process does at its start) changes
   * nothing: a tick due and not yet fired still fires, missed ticks stay
   * counted. Concurrent puts of one new name all succeed.
   */
  async put<K extends keyof T & string>(name: string, typed: TaskScheduleDefinition<T, K>): Promise<Schedule> {
    const definition = typed as ScheduleDefinition;
    validateName(name, "schedule name");
    if (!definition || typeof definition !== "object") throw new InvalidArgumentError("a schedule definition is an object { cron, task, … }");
    checkKeys(definition, ["cron", "timezone", "task", "payload", "options"], "schedule definition");
    const timezone = definition.timezone ?? "UTC";
    const cron = parseCron(definition.cron, timezone);
    checkKeys(definition.options, OPTION_KEYS, "schedule options");
    const options = definition.options ?? {};
    const now = this.host.clock.now();
    firstTick(cron, definition.cron, now);
    // The job a tick would enqueue, validated now (task, payload, options): a bad definition is refused and stores nothing.
    const probe = this.host.prepareJob({ task: definition.task, payload: definition.payload ?? null, options }, now);
    await this.host.checkStorable(probe.payload);
    const stored = await this.host.adapter.putSchedule({
      name,
      cron: definition.cron,
      timezone,
      task: probe.task,
      queue: probe.queue,
      payload: probe.payload,
      options: JSON.stringify(options),
      lastTick: latestTick(cron, now) ?? 0,
      now,
    });
    return toSchedule(stored, cron, now);
  }

  /** Deletes the schedule; NotFoundError when there is none. Jobs it already enqueued stay. */
  async remove(name: string): Promise<void> {
    validateName(name, "schedule name");
    if (!(await this.host.adapter.deleteSchedule({ name }))) throw new NotFoundError(0, `no schedule ${shown(name)}`);
  }

  async list(): Promise<Schedule[]> {
    const now = this.host.clock.now();
    return (await this.host.adapter.listSchedules()).map((s) => toSchedule(s, this.#cron(s.cron, s.timezone), now));
  }

  /**
   * One pass: for every schedule whose latest due tick has not fired,
   * fires it (the tick's job runs at the tick's time). Returns the ticks
   * THIS call fired; a tick another scheduler fired first is not among them.
   * A schedule that cannot fire (its task unknown to this process, a payload
   * over this docket's limit, a failed write) does not hold back the others:
   * its error goes to `onError` with the schedule's name, and the pass goes
   * on; without `onError`, the first such error is thrown once every other
   * schedule has been tried. Its tick stays unfired (a later pass tries it).
   */
  async runDue(options: { onError?: (error: Error, schedule: string) => void } = {}): Promise<FiredTick[]> {
    const now = this.host.clock.now();
    const fired: FiredTick[] = [];
    let first: { error: unknown } | null = null;
    for (const s of await this.host.adapter.listSchedules()) {
      try {
        const tick = s.paused ? null : latestTick(this.#cron(s.cron, s.timezone), now);
        if (tick === null || tick <= s.lastTick) continue;
        const options = JSON.parse(s.options) as ScheduleJobOptions;
        const job = this.host.prepareJob({ task: s.task, payload: JSON.parse(s.payload), options: { ...options, runAt: tick } }, now);
        const record = await this.#traced(job, (j) => this.host.adapter.fireSchedule({ name: s.name, tick, job: j, now }));
        if (record === null) continue;
        const parsed = toJob(record);
        this.host.announceScheduled(parsed);
        fired.push({ schedule: s.name, tick, job: parsed });
      } catch (error) {
        if (options.onError) options.onError(error instanceof Error ? error : new Error(String(error)), s.name);
        else first ??= { error };
      }
    }
    if (first !== null) throw first.error;
    return fired;
  }

  #traced<R>(job: NewJob, store: (job: NewJob) => Promise<R>): Promise<R> {
    return this.host.traced ? this.host.traced(job, store) : store(job);
  }

  /** Pauses the schedule: no scheduler fires its ticks until `resume`. NotFoundError when there is none. */
  pause(name: string): Promise<Schedule> {
    return this.#setPaused(name, true);
  }

  /** Resumes it from its next tick: ticks that came due while it was paused are skipped, not fired. NotFoundError when there is none. */
  resume(name: string): Promise<Schedule> {
    return this.#setPaused(name, false);
  }

  async #setPaused(name: string, paused: boolean): Promise<Schedule> {
    validateName(name, "schedule name");
    const now = this.host.clock.now();
    const current = (await this.host.adapter.listSchedules()).find((x) => x.name === name);
    if (!current) throw new NotFoundError(0, `no schedule ${shown(name)}`);
    const cron = this.#cron(current.cron, current.timezone);
    const lastTick = paused ? undefined : (latestTick(cron, now) ?? undefined);
    const stored = await this.host.adapter.pauseSchedule({ name, paused, now, ...(lastTick === undefined ? {} : { lastTick }) });
    if (!stored) throw new NotFoundError(0, `no schedule ${shown(name)}`);
    return toSchedule(stored, this.#cron(stored.cron, stored.timezone), now);
  }

  /**
   * Enqueues the schedule's job now, as a tick would (its task, payload and
   * options), outside its ticks: the schedule's next tick still fires.
   * NotFoundError when there is no such schedule.
   */
  async runNow(name: string): Promise<Job> {
    validateName(name, "schedule name");
    const s = (await this.host.adapter.listSchedules()).find((x) => x.name === name);
    if (!s) throw new NotFoundError(0, `no schedule ${shown(name)}`);
    const now = this.host.clock.now();
    const job = this.host.prepareJob({ task: s.task, payload: JSON.parse(s.payload), options: JSON.parse(s.options) as ScheduleJobOptions }, now);
    const [record] = await this.#traced(job, (j) => this.host.adapter.enqueue({ jobs: [j], now }));
    const parsed = toJob(record!);
    this.host.announceScheduled(parsed);
    return parsed;
  }
}

function toSchedule(s: StoredSchedule, cron: Cron, now: number): Schedule {
  // A paused schedule's ticks are skipped, not missed.
  const missed = s.paused ? { count: 0, first: null } : missedTicks(cron, s.lastTick, now);
  return {
    name: s.name,
    cron: s.cron,
    timezone: s.timezone,
    task: s.task,
    queue: s.queue,
    payload: JSON.parse(s.payload),
    options: JSON.parse(s.options) as ScheduleJobOptions,
    lastTickAt: s.lastTick,
    nextTickAt: nextTick(cron, now),
    missedTicks: missed.count,
    firstMissedAt: missed.first,
    paused: s.paused,
  };
}

/** What a Scheduler sees of its docket's close() (the docket's LocalBus). */
export type SchedulerClosing = { readonly closed: boolean; onClose(listener: () => Promise<void>): () => void };

/**
 * Runs `Schedules.runDue` every `intervalMs` until stopped. Errors go to
 * `onError` (a schedule's with its name; a pass's own, such as a lost
 * connection, without one) and the next pass tries again. Without
 * `onError`, each goes to `console.error` as one line: a schedule that
 * cannot fire is never silent.
 */
export class Scheduler {
  #timer: ReturnType<typeof setTimeout> | null = null;
  #running: Promise<void> | null = null;
  #stopped = true;
  readonly intervalMs: number;
  readonly #onError: (error: Error, schedule?: string) => void;

  /** The docket's close(), which stops this scheduler (absent: a scheduler made outside a Docket). */
  readonly #closing: SchedulerClosing | null;
  #offClose: (() => void) | null = null;

  constructor(
    readonly schedules: Pick<Schedules, "runDue">,
    options: { intervalMs?: number; onError?: (error: Error, schedule?: string) => void } = {},
    closing: SchedulerClosing | null = null,
  ) {
    this.#closing = closing;
    checkKeys(options, ["intervalMs", "onError"], "scheduler(options)");
    this.intervalMs = validateInteger(options.intervalMs ?? 1_000, "intervalMs", 10, 3_600_000);
    if (options.onError !== undefined && typeof options.onError !== "function") throw new InvalidArgumentError(`onError must be a function, got ${shown(options.onError)}`);
    this.#onError =
      options.onError ??
      ((error, schedule) => console.error(`docket scheduler: ${schedule === undefined ? "a pass failed" : `schedule ${shown(schedule)} did not fire`}: ${oneLine(error.message)}`));
  }

  /** Starts the passes; ClosedError once its docket is closed (whose close() stops a running scheduler). */
  start(): void {
    if (!this.#stopped) return;
    if (this.#closing?.closed) throw new ClosedError("this scheduler's docket");
    this.#offClose = this.#closing?.onClose(() => this.stop()) ?? null;
    this.#stopped = false;
    this.#tick();
  }

  /** Stops; resolves once a pass in progress has finished. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#offClose?.();
    this.#offClose = null;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running;
  }

  /** An error thrown by onError itself must not stop the passes. */
  #report(error: Error, schedule?: string): void {
    try {
      this.#onError(error, schedule);
    } catch {
      // onError is the caller's: its failure is not the scheduler's.
    }
  }

  #tick(): void {
    if (this.#stopped) return;
    this.#running = this.schedules
      .runDue({ onError: (error, schedule) => this.#report(error, schedule) })
      .then(
        () => undefined,
        (error) => this.#report(error instanceof Error ? error : new Error(String(error))),
      )
      .finally(() => {
        this.#running = null;
        if (!this.#stopped) this.#timer = setTimeout(() => this.#tick(), this.intervalMs);
      });
  }
}
