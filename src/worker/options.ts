/**
 * A worker's options (WorkerOptions): their documentation, their checks, and
 * the validated values the runtime's parts are built from (WorkerConfig).
 */
import type { TaskMap, WorkerHost } from "./host.ts";
import { InvalidArgumentError } from "../core/errors.ts";
import { shown } from "../core/shown.ts";
import { checkKeys, validateInteger, validateName } from "../core/validate.ts";
import type { WorkerEvent } from "./emitter.ts";
import type { Handler } from "./executor.ts";
import { validateLogger, type WorkerLogger } from "./log.ts";

export interface WorkerOptions<T extends TaskMap> {
  /**
   * One handler per task. The worker claims only jobs of these tasks, so a
   * job of a task it cannot run waits for a worker that can (a rolling
   * deploy does not spend attempts on old workers).
   */
  handlers: { [K in keyof T]?: Handler<T[K]> };
  /**
   * A catch-all: when given, the worker claims jobs of EVERY task and runs
   * this for the tasks that have no entry in `handlers`.
   */
  fallback?: Handler<unknown>;
  /**
   * Queues to take jobs from. Default: the queues the handled tasks' jobs go
   * to: a registered task's queue (DocketOptions.tasks), the docket's default
   * queue for a task not registered; with `fallback`, the default queue and
   * every registered task's queue. When given without the registered queue
   * of a handled task, `start()` warns once.
   */
  queues?: string[];
  /**
   * This worker's name, stored with every job it claims (`JobRecord.worker`,
   * the dashboard's running jobs, the error history), e.g. a host or pod
   * name. Default `pid-<pid>-<random>` (`w-<random>` where there is no pid).
   */
  name?: string;
  /** Handlers running at once in this worker. Default 10. */
  concurrency?: number;
  /**
   * Jobs claimed ahead into a local buffer, besides the running ones, so a
   * finishing handler starts the next job without a round trip. Buffered
   * jobs are claimed like running ones: they hold leases (heartbeated), are
   * released at a graceful stop and reclaimed after a crash within one
   * lease. 0 claims only for free handlers. Default "auto": about 250 ms
   * of work at the rate this worker has been finishing jobs, at least
   * `concurrency` and at most 2,000 (1,000 on a blocking adapter; slow jobs are not hoarded: at 10 jobs/s
   * the buffer is `concurrency`). Buffered jobs start in claim order, but a fair queue's job whose key has
   * no other job buffered starts ahead of the keys that have several; while claims show a fair queue
   * shared by such keys and a backlog, each claim takes at most 200 jobs.
   */
  prefetch?: number | "auto";
  /** Lease length; a job whose worker misses heartbeats for this long is reclaimed. Default 30 000 ms. */
  leaseMs?: number;
  /** Heartbeat period; must be shorter than leaseMs. Default leaseMs / 3. */
  heartbeatMs?: number;
  /** Sleep between claims when no job was ready. Default 1000 ms. */
  pollMs?: number;
  /** Period of the expired-lease sweep. Default leaseMs / 2. */
  reclaimMs?: number;
  /** How long `stop()` lets aborted handlers finish before releasing their jobs. Default 10 000 ms. */
  shutdownTimeoutMs?: number;
  /**
   * Default time limit of one attempt, for jobs that carry no `timeoutMs` of
   * their own (per job or per task). Past it the handler's signal aborts and
   * the attempt fails with a timeout reason. Default: none.
   */
  timeoutMs?: number;
  /** Observer of transitions this worker won, and of errors it survived. Must not throw. */
  onEvent?: (event: WorkerEvent) => void;
  /**
   * Where the worker reports, one line each, besides `onEvent`: failed
   * attempts that will retry, attempts reclaimed or lost, and errors it
   * survived (claim, heartbeat, outcome writes, connection loss) at `warn`;
   * dead letters at `error` (else `warn`); attempts ended by a cancel at
   * `info` (dropped without it). Default `console`; `null` silences it.
   */
  logger?: WorkerLogger | null;
}

const WORKER_OPTION_KEYS = [
  "handlers",
  "fallback",
  "queues",
  "name",
  "concurrency",
  "prefetch",
  "leaseMs",
  "heartbeatMs",
  "pollMs",
  "reclaimMs",
  "shutdownTimeoutMs",
  "timeoutMs",
  "onEvent",
  "logger",
] as const satisfies readonly (keyof WorkerOptions<TaskMap>)[];

/** The options, checked, with their defaults applied. */
export interface WorkerConfig {
  readonly handlers: ReadonlyMap<string, Handler<unknown>>;
  readonly fallback: Handler<unknown> | null;
  readonly queues: readonly string[];
  /** Handled tasks whose registered queue this worker does not take from; warned about at the first start. */
  readonly unreachable: readonly [task: string, queue: string][];
  /** Handled tasks the docket's `tasks` registry does not name (a misspelt handler?); warned about at the first start. */
  readonly unregistered: readonly string[];
  readonly name: string;
  readonly concurrency: number;
  /** A fixed buffer size, or null for "auto" (see WorkerOptions.prefetch). */
  readonly fixedPrefetch: number | null;
  readonly leaseMs: number;
  readonly heartbeatMs: number;
  readonly pollMs: number;
  readonly reclaimMs: number;
  readonly shutdownTimeoutMs: number;
  /** The default time limit of one attempt, or null for none. */
  readonly timeoutMs: number | null;
  /** The observer, or null when none was given (events nobody reads are then not built: see Emitter.wants). */
  readonly onEvent: ((event: WorkerEvent) => void) | null;
  readonly logger: WorkerLogger | null;
}

/** Checks `options` in a fixed order (the first bad one throws InvalidArgumentError) and applies the defaults; queues default from `host`'s task registry. */
export function resolveOptions<T extends TaskMap>(host: WorkerHost, options: WorkerOptions<T>): WorkerConfig {
  if (!options || typeof options.handlers !== "object" || options.handlers === null) {
    throw new InvalidArgumentError("worker({ handlers }) needs a handlers object");
  }
  checkKeys(options, WORKER_OPTION_KEYS, "worker(options)");
  const handlers = new Map<string, Handler<unknown>>();
  for (const [task, handler] of Object.entries(options.handlers)) {
    if (handler === undefined) continue;
    if (typeof handler !== "function") throw new InvalidArgumentError(`handler for ${shown(task)} must be a function`);
    handlers.set(validateName(task, "handlers key (task name)"), handler as Handler<unknown>);
  }
  if (options.fallback !== undefined && typeof options.fallback !== "function") throw new InvalidArgumentError("fallback must be a function");
  const fallback = options.fallback ?? null;
  if (handlers.size === 0 && !fallback) {
    throw new InvalidArgumentError("worker({ handlers }) needs at least one handler (or a fallback)");
  }
  const registered = host.taskQueues();
  const unreachable: [task: string, queue: string][] = [];
  let queues: string[];
  if (options.queues === undefined) {
    const all = fallback ? [host.defaultQueue, ...registered.values()] : [...handlers.keys()].map((task) => registered.get(task) ?? host.defaultQueue);
    queues = [...new Set(all)];
  } else {
    if (!Array.isArray(options.queues)) throw new InvalidArgumentError("queues must be an array of queue names");
    queues = options.queues.map((q) => validateName(q, "queue"));
    if (queues.length === 0) throw new InvalidArgumentError("queues must name at least one queue");
    for (const task of handlers.keys()) {
      const queue = registered.get(task);
      if (queue !== undefined && !queues.includes(queue)) unreachable.push([task, queue]);
    }
  }
  // With a registry, this docket enqueues no other task: a handler it does not name is likely misspelt.
  const unregistered = registered.size === 0 ? [] : [...handlers.keys()].filter((task) => !registered.has(task));
  const name = options.name === undefined ? defaultWorkerName() : validateName(options.name, "name");
  const concurrency = validateInteger(options.concurrency ?? 10, "concurrency", 1, 10_000);
  const fixedPrefetch = options.prefetch === undefined || options.prefetch === "auto" ? null : validateInteger(options.prefetch, "prefetch", 0, 10_000);
  const leaseMs = validateInteger(options.leaseMs ?? 30_000, "leaseMs", 50, 24 * 3600_000);
  const heartbeatMs = validateInteger(options.heartbeatMs ?? Math.floor(leaseMs / 3), "heartbeatMs", 10, leaseMs - 1);
  const pollMs = validateInteger(options.pollMs ?? 1000, "pollMs", 1, 3600_000);
  const reclaimMs = validateInteger(options.reclaimMs ?? Math.floor(leaseMs / 2), "reclaimMs", 10, 24 * 3600_000);
  const shutdownTimeoutMs = validateInteger(options.shutdownTimeoutMs ?? 10_000, "shutdownTimeoutMs", 0, 24 * 3600_000);
  const timeoutMs = options.timeoutMs === undefined ? null : validateInteger(options.timeoutMs, "timeoutMs", 1, 24 * 3600_000);
  if (options.onEvent !== undefined && typeof options.onEvent !== "function") throw new InvalidArgumentError("onEvent must be a function");
  const onEvent = options.onEvent ?? null;
  const logger = validateLogger(options.logger);
  return { handlers, fallback, queues, unreachable, unregistered, name, concurrency, fixedPrefetch, leaseMs, heartbeatMs, pollMs, reclaimMs, shutdownTimeoutMs, timeoutMs, onEvent, logger };
}

/** A name unique enough to tell workers apart: the process id where there is one, and 6 random hex digits. */
function defaultWorkerName(): string {
  const pid = (globalThis as { process?: { pid?: unknown } }).process?.pid;
  const random = crypto.randomUUID().slice(0, 6);
  return typeof pid === "number" ? `pid-${pid}-${random}` : `w-${random}`;
}
