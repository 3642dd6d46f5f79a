/**
 * `drain(docket, { handlers })`: a test helper that runs, one at a time, every
 * job that is ready (or scheduled and due) in the given queues until none is
 * left, through a real worker of `docket` (the same claims, handlers,
 * timeouts, retry policy and events as in production), then stops that
 * worker and returns what happened. Works on any adapter; meant for
 * `memoryAdapter()` in application tests. Needs real timers (the worker's).
 */
import type { DocketAdapter } from "../core/adapter.ts";
import type { Clock } from "../core/clock.ts";
import type { JobRecord, TaskMap } from "../core/job.ts";
import type { Worker, WorkerEvent, WorkerOptions } from "../worker/index.ts";
import { InvalidArgumentError } from "../core/errors.ts";

/** What `drain` runs: the worker options that say which jobs and how, and a bound on the attempts. */
export interface DrainOptions<T extends TaskMap> extends Pick<WorkerOptions<T>, "handlers" | "fallback" | "queues" | "timeoutMs" | "onEvent"> {
  /**
   * At most this many attempts start; past it `drain` stops its worker and
   * throws (a handler that enqueues jobs forever, or a job that always
   * retries at once). Default 10 000.
   */
  maxAttempts?: number;
  /** Real time `drain` waits for a claimable job to be run before it throws (a cap held by another worker, a handler that never returns). Default 10 000 ms. */
  idleTimeoutMs?: number;
}

/** What `drain` needs of a Docket (every Docket is one): its workers, its default queue, clock and adapter. */
export interface DrainSource<T extends TaskMap> {
  readonly adapter: DocketAdapter;
  readonly clock: Clock;
  readonly defaultQueue: string;
  worker(options: WorkerOptions<T>): Pick<Worker<T>, "start" | "stop" | "inFlight">;
}

/** What one `drain` ran: attempts started, and how they ended. */
export interface DrainResult {
  /** Attempts started (a job retried at once and run again counts twice). */
  attempts: number;
  succeeded: number;
  /** Attempts that failed with attempts left: the job is scheduled again (run when due, by a later drain). */
  retried: number;
  /** Attempts that failed the job for good. */
  dead: number;
  /** Attempts whose lease was lost (the job was cancelled while it ran). */
  lost: number;
}

/**
 * Runs every job claimable now in `options.queues` (default: the docket's
 * default queue) whose task has a handler (every task with `fallback`),
 * including jobs the handlers enqueue, until none is left; one at a time,
 * in claim order. Jobs of paused queues, blocked jobs without a free slot
 * and retries not yet due stay where they are. Resolves once the worker is
 * stopped and every outcome is written.
 */
export async function drain<T extends TaskMap>(docket: DrainSource<T>, options: DrainOptions<T>): Promise<DrainResult> {
  const { maxAttempts = 10_000, idleTimeoutMs = 10_000, onEvent, ...worker } = options;
  if (!Number.isSafeInteger(maxAttempts) || maxAttempts < 1) throw new InvalidArgumentError(`drain: maxAttempts must be an integer >= 1, got ${String(maxAttempts)}`);
  if (!Number.isSafeInteger(idleTimeoutMs) || idleTimeoutMs < 1) throw new InvalidArgumentError(`drain: idleTimeoutMs must be an integer >= 1, got ${String(idleTimeoutMs)}`);
  const result: DrainResult = { attempts: 0, succeeded: 0, retried: 0, dead: 0, lost: 0 };
  let ended = 0;
  const count = (event: WorkerEvent) => {
    if (event.type === "started") result.attempts++;
    else if (event.type === "succeeded") (result.succeeded++, ended++);
    else if (event.type === "retry") (result.retried++, ended++);
    else if (event.type === "dead") (result.dead++, ended++);
    else if (event.type === "lost") (result.lost++, ended++);
    else if (event.type === "released") ended++;
    onEvent?.(event);
  };
  const w = docket.worker({ ...worker, concurrency: 1, prefetch: 0, pollMs: 5, logger: null, onEvent: count });
  const queues = worker.queues ?? [docket.defaultQueue];
  const handled = (task: string) => worker.fallback !== undefined || worker.handlers[task] !== undefined;
  await w.start();
  try {
    let progressAt = Date.now();
    let seen = -1;
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 1));
      const settled = w.inFlight === 0 && ended === result.attempts;
      if (settled && !(await claimable(docket, queues, handled))) return result;
      if (result.attempts > maxAttempts) throw new Error(`drain: ${result.attempts} attempts started and jobs are still claimable (maxAttempts ${maxAttempts})`);
      if (result.attempts + ended !== seen) (seen = result.attempts + ended), (progressAt = Date.now());
      if (Date.now() - progressAt > idleTimeoutMs) throw new Error(`drain: no job started or ended for ${idleTimeoutMs} ms while jobs are claimable`);
    }
  } finally {
    await w.stop();
  }
}

/** Whether a job of `queues` that the drain's worker can run is ready, or scheduled and due, and its queue not paused. */
async function claimable(docket: Pick<DrainSource<TaskMap>, "adapter" | "clock">, queues: readonly string[], handled: (task: string) => boolean): Promise<boolean> {
  const now = docket.clock.now();
  const paused = new Set((await docket.adapter.listControls()).queues.filter((q) => q.paused).map((q) => q.queue));
  const runnable = (j: JobRecord) => handled(j.task) && (j.state === "ready" || j.runAt <= now);
  for (const queue of queues) {
    if (paused.has(queue)) continue;
    for (const state of ["ready", "scheduled"] as const) {
      for (let afterId = 0; ; ) {
        const page = await docket.adapter.list({ state, queue, afterId, limit: 500 });
        if (page.some(runnable)) return true;
        if (page.length < 500) break;
        afterId = page[page.length - 1]!.id;
      }
    }
  }
  return false;
}
