import { Cron } from "croner";
import type { DocketAdapter, NewJob, StoredSchedule } from "./adapter.ts";
import { InvalidArgumentError, NotFoundError } from "./errors.ts";
import { toJob, type Job } from "./job.ts";
import { clipped, shown } from "./shown.ts";
import { checkKeys, validateInteger, validateName } from "./validate.ts";

/** The enqueue options a schedule's jobs may carry (a schedule has no runAt, delay or idempotency key of its own). */
export interface ScheduleJobOptions {
  queue?: string;
  priority?: number;
  maxAttempts?: number;
  timeoutMs?: number;
}

export interface ScheduleDefinition<P = unknown> {
  /** Five fields (minute hour day month weekday), or six with seconds first; croner's syntax (`*`, lists, ranges, steps, `L`, `#`, nicknames like `@hourly`). */
  cron: string;
  /** IANA time zone the expression is read in. Default "UTC". */
  timezone?: string;
  task: string;
  payload?: P;
  options?: ScheduleJobOptions;
}

export interface Schedule {
  name: string;
  cron: string;
  timezone: string;
  task: string;
  queue: string;
  payload: unknown;
  options: ScheduleJobOptions;
  /** The last tick that fired (or, for a schedule that never fired, the latest tick before it was created). */
  lastTickAt: number;
  /** The next tick after now, or null when the expression has none left. */
  nextTickAt: number | null;
}

export interface FiredTick {
  schedule: string;
  tick: number;
  job: Job;
}

/** What a Docket gives its schedules: its adapter, clock, and job validation (the same as enqueue's). */
export interface ScheduleHost {
  readonly adapter: DocketAdapter;
  readonly clock: { now(): number };
  prepareJob(item: { task: string; payload: unknown; options?: ScheduleJobOptions & { runAt?: number } }, now: number): NewJob;
  /** Throws PayloadTooLargeError when the database cannot store `payload` (JSON text within maxPayloadBytes). */
  checkStorable(payload: string): Promise<void>;
  announceScheduled(job: Job): void;
}

const OPTION_KEYS = ["queue", "priority", "maxAttempts", "timeoutMs"];

/** The parsed expression; InvalidArgumentError for a bad expression or time zone. */
export function parseCron(cron: unknown, timezone: unknown): Cron {
  if (typeof cron !== "string" || cron.trim() === "") throw new InvalidArgumentError(`cron must be a cron expression, got ${shown(cron)}`);
  if (typeof timezone !== "string" || timezone === "") throw new InvalidArgumentError(`timezone must be an IANA time zone name, got ${shown(timezone)}`);
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
  } catch {
    throw new InvalidArgumentError(`timezone ${shown(timezone)} is not an IANA time zone name (e.g. "Europe/Berlin")`);
  }
  try {
    return new Cron(cron, { timezone, paused: true });
  } catch (error) {
    // croner's message quotes the expression: cut like any value in a message.
    throw new InvalidArgumentError(`cron ${shown(cron)} is not a valid expression: ${clipped(String((error as Error)?.message ?? error))}`);
  }
}

/**
 * The next tick after `now`; InvalidArgumentError when there is none: the
 * expression matches no date (`0 0 31 2 *`), or none after `now` (a year
 * field in the past). A schedule must fire, so `put` refuses it.
 */
function firstTick(cron: Cron, expression: string, now: number): number {
  let next: number | null;
  try {
    next = nextTick(cron, now);
  } catch (error) {
    throw new InvalidArgumentError(`cron ${shown(expression)} cannot be evaluated: ${clipped(String((error as Error)?.message ?? error))}`);
  }
  if (next !== null) return next;
  const last = latestTick(cron, now);
  throw new InvalidArgumentError(
    last === null
      ? `cron ${shown(expression)} never fires: no date matches it`
      : `cron ${shown(expression)} never fires again: its last tick was ${new Date(last).toISOString()}`,
  );
}

/** How far back `latestTick` looks when croner cannot walk back: one Gregorian cycle, after which the calendar repeats. */
const LOOKBACK_MS = 400 * 365.2425 * 24 * 3600_000;

/** The latest tick at or before `now` (ticks fall on whole seconds), or null. */
export function latestTick(cron: Cron, now: number): number | null {
  const until = now - (now % 1_000) + 1_000;
  try {
    const run = cron.previousRuns(1, new Date(until))[0];
    return run === undefined ? null : run.getTime();
  } catch {
    // croner 10 throws a TypeError walking back to some ticks of an earlier year (`0 0 29 2 *` after 2024):
    // found with forward steps instead, and remembered until the next tick (a scheduler asks every second).
    const known = bisected.get(cron);
    if (known !== undefined && (known.tick ?? -Infinity) < until && until <= known.next) return known.tick;
    const tick = latestTickBefore(cron, until);
    bisected.set(cron, { tick, next: cron.nextRun(new Date(until - 1_000))?.getTime() ?? Number.POSITIVE_INFINITY });
    return tick;
  }
}

/** Per expression, the last `latestTickBefore` answer and the first tick after it: the answer until then. */
const bisected = new WeakMap<Cron, { tick: number | null; next: number }>();

/**
 * The latest tick before `until` (whole seconds), by bisection over start
 * points: `nextRun(s)` (the first tick after s) grows with s, so the last s
 * whose next tick is before `until` gives the latest tick. About 40 steps.
 */
function latestTickBefore(cron: Cron, until: number): number | null {
  const nextAfter = (s: number) => cron.nextRun(new Date(s * 1_000))?.getTime() ?? Number.POSITIVE_INFINITY;
  let lo = Math.floor((until - LOOKBACK_MS) / 1_000);
  let hi = until / 1_000 - 1;
  if (nextAfter(lo) >= until) return null;
  // Invariant: nextAfter(lo) < until; the answer's start point is in [lo, hi].
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (nextAfter(mid) < until) lo = mid;
    else hi = mid - 1;
  }
  return nextAfter(lo);
}

export function nextTick(cron: Cron, now: number): number | null {
  return cron.nextRun(new Date(now))?.getTime() ?? null;
}

/**
 * Recurring jobs (see Docket.schedules). Missed ticks: a pass enqueues the
 * latest tick that is due and not yet fired; older missed ticks (while no
 * scheduler ran) are skipped, so downtime yields one catch-up job per
 * schedule, not one per missed tick. Each tick fires at most once, however
 * many schedulers run (the database decides: see DocketAdapter.fireSchedule).
 */
export class Schedules {
  /** Parsed expressions by `cron` and time zone: a pass (every second per scheduler) parses each one once per process. */
  readonly #parsed = new Map<string, Cron>();

  constructor(readonly host: ScheduleHost) {}

  #cron(cron: string, timezone: string): Cron {
    const key = `${timezone}\u0000${cron}`;
    let parsed = this.#parsed.get(key);
    if (parsed === undefined) this.#parsed.set(key, (parsed = parseCron(cron, timezone)));
    return parsed;
  }

  /** Creates or replaces the schedule `name`. A new or changed schedule fires from its next tick on, never for ticks before this call. */
  async put<P>(name: string, definition: ScheduleDefinition<P>): Promise<Schedule> {
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
   */
  async runDue(): Promise<FiredTick[]> {
    const now = this.host.clock.now();
    const fired: FiredTick[] = [];
    for (const s of await this.host.adapter.listSchedules()) {
      const tick = latestTick(this.#cron(s.cron, s.timezone), now);
      if (tick === null || tick <= s.lastTick) continue;
      const options = JSON.parse(s.options) as ScheduleJobOptions;
      const job = this.host.prepareJob({ task: s.task, payload: JSON.parse(s.payload), options: { ...options, runAt: tick } }, now);
      const record = await this.host.adapter.fireSchedule({ name: s.name, tick, job, now });
      if (record === null) continue;
      const parsed = toJob(record);
      this.host.announceScheduled(parsed);
      fired.push({ schedule: s.name, tick, job: parsed });
    }
    return fired;
  }
}

function toSchedule(s: StoredSchedule, cron: Cron, now: number): Schedule {
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
  };
}

/** Runs `Schedules.runDue` every `intervalMs` until stopped; errors go to `onError` and the next pass tries again. */
export class Scheduler {
  #timer: ReturnType<typeof setTimeout> | null = null;
  #running: Promise<void> | null = null;
  #stopped = true;
  readonly intervalMs: number;
  readonly #onError: (error: Error) => void;

  constructor(
    readonly schedules: Schedules,
    options: { intervalMs?: number; onError?: (error: Error) => void } = {},
  ) {
    checkKeys(options, ["intervalMs", "onError"], "scheduler(options)");
    this.intervalMs = validateInteger(options.intervalMs ?? 1_000, "intervalMs", 10, 3_600_000);
    this.#onError = options.onError ?? (() => undefined);
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#tick();
  }

  /** Stops; resolves once a pass in progress has finished. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running;
  }

  #tick(): void {
    if (this.#stopped) return;
    this.#running = this.schedules
      .runDue()
      .then(
        () => undefined,
        (error) => this.#onError(error as Error),
      )
      .finally(() => {
        this.#running = null;
        if (!this.#stopped) this.#timer = setTimeout(() => this.#tick(), this.intervalMs);
      });
  }
}
