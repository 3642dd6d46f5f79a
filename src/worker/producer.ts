/**
 * The producer: the claim loop that fills the local buffer, its sleeps and
 * wake-ups (enqueue notices, freed handler slots, a stop), and when a claim
 * also stages due scheduled jobs.
 */
import type { WorkerHost } from "./host.ts";
import type { JobRecord } from "../core/job.ts";
import type { SettleAndHandOffParams } from "../core/adapter.ts";
import { errorBackoffDelay } from "../core/retry.ts";
import { nextTurn } from "../core/turn.ts";
import { track, type InFlight } from "./attempt.ts";
import type { Emitter } from "./emitter.ts";
import type { LocalBuffer } from "./local-buffer.ts";
import type { Lifecycle } from "./state.ts";
import { SHARED_FAIR_CLAIM_MAX, SHARED_FAIR_MS, sharedFairClaim } from "./fair-claims.ts";

/** Stage times a worker keeps (Producer.requestStage): a burst of delayed jobs with many run times keeps the earliest. */
export const STAGE_TIMES_MAX = 1000;

/** The longest delay setTimeout honours (a longer one fires after 1 ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** What a hand-off claims (see DocketAdapter.settleAndHandOff). */
export type HandOffClaim = SettleAndHandOffParams["handOff"];

/** First pause after a failed claim or outcome write; doubles per failure in a row. */
export const ERROR_BACKOFF_BASE_MS = 100;
/** Longest pause between tries after failures in a row. */
export const ERROR_BACKOFF_MAX_MS = 30_000;

/**
 * The claim loop between claims:
 * - awake: claiming (or about to); a wake-up makes it `woken`.
 * - woken: a wake-up came while awake: the next sleep between claims returns
 *   at once (→ awake).
 * - sleeping: waiting up to pollMs for work; a wake-up or a stop ends it (→ awake).
 * - backingOff: pausing after a failed claim; only a stop ends it early (→
 *   awake, or woken if it was woken before the pause).
 */
type LoopRest = "awake" | "woken" | "sleeping" | "backingOff";

export interface ProducerParts {
  readonly host: WorkerHost;
  readonly life: Lifecycle;
  readonly inFlight: InFlight;
  readonly buffer: LocalBuffer;
  readonly emitter: Emitter;
  /** Starts buffered jobs while handlers are free. */
  readonly startBuffered: () => void;
  /** Handlers free to start a job now. */
  readonly freeHandlers: () => number;
  /** Outcomes queued or being written (see `#held`). */
  readonly recording: () => number;
  /** A claim begun at `at` returned `records` (see PausedQueues.claimed). */
  readonly claimed: (records: readonly JobRecord[], at: number) => void;
}

export interface ProducerConfig {
  readonly name: string;
  readonly queues: readonly string[];
  /** The tasks to claim, or undefined for every task (a fallback handler). */
  readonly tasks: readonly string[] | undefined;
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly pollMs: number;
  /** Whether the next claim may overlap the write of finished jobs' outcomes: not when statements block the thread. */
  readonly overlap: boolean;
}

/**
 * Claims while the worker runs. Guarantees: failed claims back off
 * exponentially (with jitter) and reset on success; the loop yields to the
 * event loop between claims, so timers run during a backlog; a claim stages
 * due jobs at most every pollMs unless one is asked for sooner; a buffered
 * job is never a constrained one (keyed, or of a capped queue or task):
 * each claim takes at most as many constrained jobs as handlers are free
 * beyond the buffered jobs and the room other claims in flight hold (this
 * loop's, and the outcome writes' hand-offs: `reserveConstrained`), and
 * those start at once (see `#claim`).
 */
export class Producer {
  readonly #parts: ProducerParts;
  readonly #config: ProducerConfig;
  /** Where the loop is between claims (see LoopRest); `#endSleep` ends the sleep while sleeping or backing off. */
  #rest: LoopRest = "awake";
  #endSleep: (() => void) | null = null;
  /** A wake-up is scheduled for the next macrotask turn (`wakeNextTurn`). */
  #wakeScheduled = false;
  /** When the last claim admitted due scheduled jobs; whether the next claim must stage; the timer that will ask it to. */
  #lastStage = Number.NEGATIVE_INFINITY;
  #stageRequested = false;
  /** Times at which a claim must stage (STAGE_TIMES_MAX at most, ascending, no two equal), and the timer for the first. */
  #stageTimes: number[] = [];
  #stageTimer: ReturnType<typeof setTimeout> | null = null;
  /** The timer that wakes the loop when a rate limit that held jobs back has room again. */
  #rateTimer: { at: number; timer: ReturnType<typeof setTimeout> } | null = null;
  /** The last claim found nothing. */
  #idle = false;
  /** Room for constrained jobs that this loop's claim in flight may take. */
  #claiming = 0;
  /** Until when claims take at most SHARED_FAIR_CLAIM_MAX jobs (see fair-claims.ts). */
  #sharedFairUntil = Number.NEGATIVE_INFINITY;
  /** Handlers reserved for the jobs of hand-offs in flight (`reserveConstrained`). */
  #reserved = 0;

  constructor(parts: ProducerParts, config: ProducerConfig) {
    this.#parts = parts;
    this.#config = config;
  }

  /** Runs the claim loop until the worker stops; resolves when it has ended. */
  async run(): Promise<void> {
    const { life, buffer, emitter, host } = this.#parts;
    const { concurrency } = this.#config;
    let failures = 0;
    while (!life.stopping) {
      this.#parts.startBuffered();
      const prefetch = buffer.size();
      const room = concurrency + prefetch - this.#held(prefetch);
      let full = false;
      if (room > 0 && buffer.low(prefetch)) {
        const limit = host.clock.now() < this.#sharedFairUntil ? Math.min(room, SHARED_FAIR_CLAIM_MAX) : room;
        const constrained = this.#constrainedRoom(limit);
        this.#claiming = constrained;
        const claimed = await this.#claim(limit, constrained);
        this.#claiming = 0;
        if (!Array.isArray(claimed)) {
          const pause = errorBackoffDelay(++failures, ERROR_BACKOFF_BASE_MS, ERROR_BACKOFF_MAX_MS, host.random);
          emitter.emit({ type: "error", error: claimed.error, operation: "claim", retryInMs: pause });
          await this.#sleep(pause, false);
          continue;
        }
        failures = 0;
        // Nothing claimable at all, not merely no room for constrained jobs (a freed handler would change that).
        this.#idle = claimed.length === 0 && constrained > 0;
        if (sharedFairClaim(claimed)) this.#sharedFairUntil = host.clock.now() + SHARED_FAIR_MS;
        for (const record of claimed) buffer.add(track(this.#parts.inFlight, record));
        this.#parts.startBuffered();
        full = claimed.length === limit;
      }
      if (life.stopping) break;
      // A full batch means more may be waiting: a finishing job wakes the loop once the buffer runs low.
      if (!full || !buffer.low(prefetch) || this.#held(prefetch) >= concurrency + prefetch) {
        await this.#sleep(this.#config.pollMs, true);
      }
      // A synchronous driver (SQLite) resolves every statement without a macrotask: yield, so timers run.
      else await nextTurn();
    }
  }

  /** Whether the last claim found nothing to claim though it had room for any job: a handler that frees its slot then needs no claim before its outcome is written. */
  get idle(): boolean {
    return this.#idle;
  }

  /** Up to `max`: handlers free beyond the buffered jobs and the room other claims in flight hold. */
  #constrainedRoom(max: number): number {
    return Math.max(0, Math.min(max, this.#parts.freeHandlers() - this.#parts.buffer.length - this.#reserved - this.#claiming));
  }

  /**
   * Reserves handlers for up to `max` constrained jobs a hand-off may claim
   * (see `#claim` for the room). Buffered jobs do not start on reserved
   * handlers (see `reserved`), so the hand-off's jobs start at once. Returns
   * how many; the caller gives them back with `accept` or `release`.
   */
  reserveConstrained(max: number): number {
    const n = this.#constrainedRoom(max);
    this.#reserved += n;
    return n;
  }

  /** Handlers reserved for hand-offs in flight: buffered jobs leave them free. */
  get reserved(): number {
    return this.#reserved;
  }

  /** Gives back `reserved` room that a hand-off did not use (it failed). */
  release(reserved: number): void {
    this.#reserved -= reserved;
  }

  /** Starts the jobs a hand-off claimed with `reserved` handlers (at most that many): ahead of the buffered jobs, at once. */
  accept(records: readonly JobRecord[], reserved: number): void {
    this.#parts.buffer.addFirst(records.map((record) => track(this.#parts.inFlight, record)));
    this.#reserved -= reserved;
    this.#parts.startBuffered();
  }

  /** The claim a hand-off of up to `limit` jobs makes at `now`: this worker's queues, tasks, lease and name. */
  handOffClaim(limit: number, now: number): HandOffClaim {
    const config = this.#config;
    return { queues: config.queues, tasks: config.tasks && [...config.tasks], limit, now, leaseToken: crypto.randomUUID(), leaseExpiresAt: now + config.leaseMs, worker: config.name };
  }

  /** Jobs this worker takes became ready (`due`: some must be staged by the next claim first): wakes the loop. */
  ready(due: boolean): void {
    if (due) this.#stageRequested = true;
    this.wake();
  }

  /**
   * Asks a claim to admit due scheduled jobs at `at` (a retry this worker
   * scheduled, a delayed job or a released child of this docket), waking
   * the loop then. Up to STAGE_TIMES_MAX times are kept, the earliest ones;
   * a later one dropped from them is staged by the claim at `at`'s poll.
   */
  requestStage(at: number): void {
    if (!this.#parts.life.started || this.#parts.life.stopping) return;
    const times = this.#stageTimes;
    let i = times.length;
    while (i > 0 && times[i - 1]! > at) i--;
    if (times[i - 1] === at) return;
    if (i === STAGE_TIMES_MAX) return;
    times.splice(i, 0, at);
    if (times.length > STAGE_TIMES_MAX) times.pop();
    if (i === 0) this.#armStage();
  }

  /**
   * (Re)sets the stage timer for the earliest requested time. A timer can
   * fire before the clock reaches its time (by a millisecond; or the clock
   * is not real time: a test's): the time then waits one more timer, and
   * after that counts as reached (the claim decides), so a clock that does
   * not advance costs two timers per time, never a loop. Delays are capped
   * at setTimeout's limit (2^31 − 1 ms, about 24.8 days): a later time is
   * re-armed when the cap runs out.
   */
  #armStage(early = false): void {
    if (this.#stageTimer) clearTimeout(this.#stageTimer);
    this.#stageTimer = null;
    const at = this.#stageTimes[0];
    if (at === undefined) return;
    const wait = at - this.#parts.host.clock.now();
    this.#stageTimer = setTimeout(
      () => {
        this.#stageTimer = null;
        const now = this.#parts.host.clock.now();
        const times = this.#stageTimes;
        let due = 0;
        while (due < times.length && times[due]! <= now) due++;
        if (due === 0 && (wait > MAX_TIMER_MS || !early)) return this.#armStage(wait <= MAX_TIMER_MS);
        times.splice(0, Math.max(due, 1));
        this.#stageRequested = true;
        this.wake();
        this.#armStage();
      },
      Math.min(Math.max(0, wait), MAX_TIMER_MS),
    );
  }

  /** Cancels the pending stage requests' timer and a rate limit's wake-up (the worker stopped). */
  clearStageTimer(): void {
    if (this.#stageTimer) clearTimeout(this.#stageTimer);
    this.#stageTimer = null;
    this.#stageTimes = [];
    if (this.#rateTimer) clearTimeout(this.#rateTimer.timer);
    this.#rateTimer = null;
  }

  /** Wakes the loop at `at`, when a rate limit that kept jobs from a claim has room again (the earliest such time asked for wins). */
  #wakeAt(at: number): void {
    if (!this.#parts.life.started || this.#parts.life.stopping) return;
    if (this.#rateTimer && this.#rateTimer.at <= at) return;
    if (this.#rateTimer) clearTimeout(this.#rateTimer.timer);
    const timer = setTimeout(() => {
      this.#rateTimer = null;
      this.wake();
    }, Math.min(Math.max(0, at - this.#parts.host.clock.now()), MAX_TIMER_MS));
    this.#rateTimer = { at, timer };
  }

  /** Ends the loop's sleep now, or makes its next sleep return at once. */
  wake(): void {
    if (this.#rest === "awake") this.#rest = "woken";
    else if (this.#rest === "sleeping" || (this.#rest === "backingOff" && this.#parts.life.stopping)) this.#endSleep!();
  }

  /**
   * Wakes the claim loop on the next macrotask turn (once, however often it
   * is called meanwhile): a handler that frees its slot must not resume the
   * loop inside its own turn, or a synchronous driver (SQLite) would chain
   * claims and handlers without ever letting timers run.
   */
  wakeNextTurn(): void {
    if (this.#wakeScheduled) return;
    this.#wakeScheduled = true;
    void nextTurn().then(() => {
      this.#wakeScheduled = false;
      this.wake();
    });
  }

  /**
   * The attempts that count against the claim loop's room: every one held
   * (buffered, running, retrying its outcome's write) except up to
   * `prefetch` finished ones whose outcomes are queued or being written, so
   * the next claim overlaps their write. A worker holds at most
   * concurrency + 2 × prefetch leases. On a blocking adapter every held
   * attempt counts: claims and outcome writes take turns.
   */
  #held(prefetch: number): number {
    const size = this.#parts.inFlight.size;
    return this.#config.overlap ? size - Math.min(this.#parts.recording(), prefetch) : size;
  }

  /**
   * The claimed jobs, or what the claim threw. At most `constrainedLimit`
   * of them are constrained, and the adapter returns those first. Until the
   * claim returns, handlers only free up and start buffered jobs, so free
   * handlers minus buffered jobs does not shrink: buffered in order behind
   * the jobs already waiting, the constrained ones start at once.
   */
  async #claim(limit: number, constrainedLimit: number): Promise<JobRecord[] | { error: Error }> {
    const { host } = this.#parts;
    const config = this.#config;
    const now = host.clock.now();
    const stage = this.#stageRequested || now - this.#lastStage >= config.pollMs;
    // Consumed now: a request that arrives while this claim is in flight (its statements may already have
    // staged) stays for the next claim. A failed claim puts this one back.
    if (stage) this.#stageRequested = false;
    try {
      const claimed = await host.adapter.claim({
        queues: config.queues,
        tasks: config.tasks && [...config.tasks],
        limit,
        constrainedLimit,
        now,
        leaseToken: crypto.randomUUID(),
        leaseExpiresAt: now + config.leaseMs,
        worker: config.name,
        stage,
        onRateLimited: (at) => this.#wakeAt(at),
      });
      if (stage) this.#lastStage = now;
      this.#parts.claimed(claimed, now);
      return claimed;
    } catch (error) {
      if (stage) this.#stageRequested = true;
      return { error: error as Error };
    }
  }

  /** Sleeps up to `ms` (see LoopRest for what ends it sooner). */
  #sleep(ms: number, wakeable: boolean): Promise<void> {
    if (wakeable && this.#rest === "woken") {
      this.#rest = "awake";
      return Promise.resolve();
    }
    // A wake-up that came before a backoff pause still counts after it.
    const after: LoopRest = this.#rest === "woken" ? "woken" : "awake";
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#endSleep = null;
        this.#rest = after;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#rest = wakeable ? "sleeping" : "backingOff";
      this.#endSleep = done;
    });
  }
}
