/**
 * Reading jobs: one by id or by idempotency key, a page of them (`list`),
 * and `waitFor`, which polls one job until it is finished; and the
 * registered workers. Input is checked before anything is read; nothing
 * here writes.
 */
import { jobsOf } from "../core/dependencies.ts";
import type { DocketAdapter } from "../core/adapter.ts";
import type { Clock } from "../core/clock.ts";
import { InvalidArgumentError, NotFoundError, WaitTimeoutError } from "../core/errors.ts";
import { toJob, type Job, type TaskMap } from "../core/job.ts";
import { shown } from "../core/shown.ts";
import { JOB_STATES, TERMINAL_STATES, isJobState, type JobState } from "../core/states.ts";
import { MAX_DELAY_MS, checkKeys, validateInteger, validateName, validateSearchText } from "../core/validate.ts";

/** With a typed Docket, `task` is one of its tasks. */
export interface ListOptions<T extends TaskMap = TaskMap> {
  state?: JobState;
  queue?: string;
  task?: keyof T & string;
  /** Only jobs of this concurrency key: its holders (ready, running) and the jobs it blocks. */
  concurrencyKey?: string;
  /**
   * Only jobs whose last error contains this text (1 to 200 characters),
   * matched literally (`%`, `_` and `\` are plain characters) and
   * case-sensitively; jobs with no last error never match. Give a state too
   * (e.g. "dead"): the jobs the other filters leave are scanned.
   */
  errorContains?: string;
  afterId?: number;
  /** Default 100, at most 10 000. */
  limit?: number;
}

export function validateId(id: unknown): number {
  return validateInteger(id, "id", 1, Number.MAX_SAFE_INTEGER);
}

export async function getJob(adapter: DocketAdapter, id: number): Promise<Job | null> {
  const record = await adapter.get({ id: validateId(id) });
  return record ? toJob(record) : null;
}

/**
 * Job `id`'s parents and children (EnqueueOptions.after), each in id order;
 * a purged one is left out. Both empty for a job without dependencies.
 */
export async function dependenciesOf(adapter: DocketAdapter, id: number): Promise<{ parents: Job[]; children: Job[] }> {
  const ids = await adapter.dependencies({ id: validateId(id) });
  return { parents: await jobsOf(adapter, ids.parents), children: await jobsOf(adapter, ids.children) };
}

export async function getByIdempotencyKey(adapter: DocketAdapter, key: string): Promise<Job | null> {
  const record = await adapter.getByIdempotencyKey({ key: validateName(key, "idempotencyKey") });
  return record ? toJob(record) : null;
}

/** A page of jobs, oldest id first (see ListOptions). */
export async function listJobs<T extends TaskMap>(adapter: DocketAdapter, options: ListOptions<T>): Promise<Job[]> {
  checkKeys(options, ["state", "queue", "task", "concurrencyKey", "errorContains", "afterId", "limit"], "list(options)");
  const limit = validateInteger(options.limit ?? 100, "limit", 1, 10_000);
  if (options.state !== undefined && !isJobState(options.state)) {
    throw new InvalidArgumentError(`state must be one of ${JOB_STATES.join(", ")}, got ${shown(options.state)}`);
  }
  const records = await adapter.list({
    limit,
    state: options.state,
    queue: options.queue === undefined ? undefined : validateName(options.queue, "queue"),
    task: options.task === undefined ? undefined : validateName(options.task, "task"),
    concurrencyKey: options.concurrencyKey === undefined ? undefined : validateName(options.concurrencyKey, "concurrencyKey"),
    errorContains: options.errorContains === undefined ? undefined : validateSearchText(options.errorContains, "errorContains"),
    afterId: options.afterId === undefined ? undefined : validateInteger(options.afterId, "afterId", 0, Number.MAX_SAFE_INTEGER),
  });
  return records.map((r) => toJob(r));
}

/** `docket.waitFor`'s options (see Docket.waitFor). */
export interface WaitOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
  pollMs?: number;
}

/** See Docket.waitFor; `get` reads the job (null: none). */
export async function waitFor<J extends Job>(get: (id: number) => Promise<J | null>, id: number, options: WaitOptions): Promise<J> {
  validateId(id);
  checkKeys(options, ["signal", "timeoutMs", "pollMs"], "waitFor(options)");
  const pollMs = validateInteger(options.pollMs ?? 100, "pollMs", 1, 3_600_000);
  const timeoutMs = options.timeoutMs === undefined ? null : validateInteger(options.timeoutMs, "timeoutMs", 0, MAX_DELAY_MS);
  const { signal } = options;
  if (signal !== undefined && (typeof signal !== "object" || signal === null || typeof signal.aborted !== "boolean" || typeof signal.addEventListener !== "function")) {
    throw new InvalidArgumentError(`signal must be an AbortSignal, got ${shown(signal)}`);
  }
  const deadline = timeoutMs === null ? Number.POSITIVE_INFINITY : Date.now() + timeoutMs;
  for (;;) {
    if (signal?.aborted) throw signal.reason;
    const job = await get(id);
    if (!job) throw new NotFoundError(id, `no job ${id} to wait for`);
    if ((TERMINAL_STATES as readonly string[]).includes(job.state)) return job;
    const left = deadline - Date.now();
    if (left <= 0) throw new WaitTimeoutError(id, timeoutMs!);
    await pause(Math.min(pollMs, left), signal);
  }
}

/** Sleeps `ms`, or less when `signal` aborts first (the caller checks `signal.aborted` after). */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** A registered worker (see Docket.workers): its WorkerRecord with the queues as a list. */
export interface WorkerInfo {
  id: string;
  name: string;
  host: string;
  pid: number;
  queues: string[];
  concurrency: number;
  startedAt: number;
  heartbeatAt: number;
  /** A lease after its last heartbeat: a worker that stopped heartbeating (crashed) is no longer listed after it. */
  expiresAt: number;
  /** Jobs it held (running or claimed ahead) at its last heartbeat. */
  jobsInHand: number;
}

/** The workers whose registration has not expired, by name (at most 1,000). */
export async function listWorkers(adapter: DocketAdapter, clock: Clock): Promise<WorkerInfo[]> {
  const rows = await adapter.listWorkers({ now: clock.now(), limit: 1_000 });
  return rows.map((w) => ({ ...w, queues: JSON.parse(w.queues) as string[] }));
}
