/**
 * `memoryAdapter()`: the DocketAdapter contract on plain in-process maps, with
 * no SQL and no driver. One process, not durable: the jobs live as long as
 * the state object. Every method does its whole work in one synchronous
 * step before its promise settles (nothing awaits between reading and
 * writing the state), so each call is atomic, as one database transaction
 * is; policy is the core's (TRANSITIONS, claim order, cap rule, admission).
 * `connect()` opens another handle on the same state: what a second
 * connection to one database is, within one process.
 */
import type {
  CancelParams,
  ClaimParams,
  Dependencies,
  DeleteScheduleParams,
  DocketAdapter,
  EnqueueParams,
  EnqueuedRecord,
  ExpireParams,
  ExtendLeasesParams,
  FireScheduleParams,
  GetByIdempotencyKeyParams,
  GetParams,
  HeldLeasesParams,
  LeaseKey,
  ListExpiredParams,
  ListParams,
  CountParams,
  MigrateResult,
  PurgeParams,
  PutScheduleParams,
  QueueControl,
  ReadyNotice,
  RepairKeysParams,
  ReplayDeadParams,
  RunNowParams,
  WorkerRecord,
  ReplayParams,
  SetProgressParams,
  RecordStepParams,
  SetQueueControlParams,
  SetTaskControlParams,
  SettleParams,
  SettledJob,
  StatsParams,
  StoredControls,
  StoredSchedule,
  StoredStats,
  TaskControl,
} from "../../core/adapter.ts";
import { WORKER_ROWS_KEPT_MS } from "../../core/adapter.ts";
import { AdapterError, ClosedError, DocketError, SchemaMissingError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import { claim } from "./claim.ts";
import { enqueue, getByIdempotencyKey } from "./enqueue.ts";
import { dependenciesOf } from "./dependencies.ts";
import { guardHolds, transition } from "./guarded-write.ts";
import { replay, replayDead, purge, repairKeys, runNow } from "./maintenance.ts";
import { failureWrite, settle } from "./outcomes.ts";
import { countJobs, getJob, listExpired, listJobs, readStats } from "./reads.ts";
import { deleteSchedule, fireSchedule, listControls, listSchedules, pauseSchedule, putSchedule, setQueueControl, setTaskControl } from "./schedules.ts";
import { emptyState, type MemoryState } from "./state.ts";

/** The one schema version a memory store has: `migrate()` applies it once per state. */
const MEMORY_SCHEMA_VERSION = 1;

/** The tables a SQL store would name in SCHEMA_MISSING, per kind of call. */
type Table = "jobs" | "queues" | "schedules" | "migrations" | "workers";

/** An adapter handle on a memory state. */
export class MemoryAdapter implements DocketAdapter {
  readonly name = "memory";
  /** Calls run on the calling thread: the worker yields a turn between its outcome writes and its next claim, as on SQLite. */
  readonly blocking = true;
  readonly #state: MemoryState;
  readonly #listeners = new Set<(notice: ReadyNotice) => void>();
  #closed = false;

  /** @internal Use `memoryAdapter()`, or `connect()` for another handle on the same state. */
  constructor(state: MemoryState = emptyState()) {
    this.#state = state;
  }

  /** Another handle on this handle's state (as a second connection to one database): its own `close()`, the same jobs. */
  connect(): MemoryAdapter {
    return new MemoryAdapter(this.#state);
  }

  migrate(): Promise<MigrateResult> {
    return this.#run("migrations", false, (s) => {
      if (s.migrated) return { applied: [], version: MEMORY_SCHEMA_VERSION };
      s.migrated = true;
      return { applied: [MEMORY_SCHEMA_VERSION], version: MEMORY_SCHEMA_VERSION };
    });
  }

  enqueue(params: EnqueueParams): Promise<EnqueuedRecord[]> {
    return this.#run("jobs", true, (s) => enqueue(s, params, this.name));
  }

  getByIdempotencyKey(params: GetByIdempotencyKeyParams): Promise<JobRecord | null> {
    return this.#run("jobs", true, (s) => getByIdempotencyKey(s, params.key));
  }

  dependencies(params: { id: number }): Promise<Dependencies> {
    return this.#run("jobs", true, (s) => dependenciesOf(s, params.id));
  }

  claim(params: ClaimParams): Promise<JobRecord[]> {
    return this.#run("jobs", true, (s) => claim(s, params));
  }

  extendLeases(params: ExtendLeasesParams): Promise<LeaseKey[]> {
    return this.#run("jobs", true, (s) => {
      const kept = new Map<number, LeaseKey>();
      for (const item of params.items) {
        if (kept.has(item.id)) continue;
        const moved = transition(s, "heartbeat", { ...item, now: params.now }, { leaseExpiresAt: params.leaseExpiresAt });
        if (moved) kept.set(item.id, { id: item.id, leaseToken: item.leaseToken });
      }
      return [...kept.values()];
    });
  }

  heldLeases(params: HeldLeasesParams): Promise<LeaseKey[]> {
    return this.#run("jobs", true, (s) => {
      const held = new Map<number, LeaseKey>();
      for (const item of params.items) {
        const job = s.jobs.get(item.id);
        if (job && guardHolds(job, "heartbeat", { now: 0, leaseToken: item.leaseToken })) held.set(item.id, { id: item.id, leaseToken: item.leaseToken });
      }
      return [...held.values()];
    });
  }

  setProgress(params: SetProgressParams): Promise<JobRecord | null> {
    return this.#write("heartbeat", params, { progress: params.progress });
  }

  recordStep(params: RecordStepParams): Promise<JobRecord | null> {
    return this.#write("heartbeat", params, { steps: params.steps });
  }

  settle(params: SettleParams): Promise<(SettledJob | null)[]> {
    return this.#run("jobs", true, (s) => settle(s, params));
  }

  listExpired(params: ListExpiredParams): Promise<JobRecord[]> {
    return this.#run("jobs", true, (s) => listExpired(s, params));
  }

  expire(params: ExpireParams): Promise<JobRecord | null> {
    const w = failureWrite(params, "expireRetry", "expireBury");
    return this.#write(w.event, params, w.set);
  }

  cancel(params: CancelParams): Promise<JobRecord | null> {
    return this.#write("cancel", params, { leaseToken: null, leaseExpiresAt: null, finishedAt: params.now });
  }

  replay(params: ReplayParams): Promise<JobRecord | null> {
    return this.#run("jobs", true, (s) => replay(s, params));
  }

  runNow(params: RunNowParams): Promise<JobRecord | null> {
    return this.#run("jobs", true, (s) => runNow(s, params));
  }

  replayDead(params: ReplayDeadParams): Promise<JobRecord[]> {
    return this.#run("jobs", true, (s) => replayDead(s, params));
  }

  setQueueControl(params: SetQueueControlParams): Promise<QueueControl> {
    return this.#run("queues", true, (s) => setQueueControl(s, params, this.name));
  }

  setTaskControl(params: SetTaskControlParams): Promise<TaskControl> {
    return this.#run("queues", true, (s) => setTaskControl(s, params, this.name));
  }

  listControls(): Promise<StoredControls> {
    return this.#run("queues", true, (s) => listControls(s));
  }

  purge(params: PurgeParams): Promise<number> {
    return this.#run("jobs", true, (s) => purge(s, params, this.name));
  }

  repairKeys(params: RepairKeysParams): Promise<string[]> {
    return this.#run("jobs", true, (s) => repairKeys(s, params));
  }

  stats(params: StatsParams): Promise<StoredStats> {
    return this.#run("jobs", true, (s) => readStats(s, params));
  }

  putSchedule(params: PutScheduleParams): Promise<StoredSchedule> {
    return this.#run("schedules", true, (s) => putSchedule(s, params));
  }

  listSchedules(): Promise<StoredSchedule[]> {
    return this.#run("schedules", true, (s) => listSchedules(s));
  }

  deleteSchedule(params: DeleteScheduleParams): Promise<boolean> {
    return this.#run("schedules", true, (s) => deleteSchedule(s, params.name));
  }

  pauseSchedule(params: { name: string; paused: boolean; now: number; lastTick?: number }): Promise<StoredSchedule | null> {
    return this.#run("schedules", true, (s) => pauseSchedule(s, params));
  }

  putWorker(worker: WorkerRecord): Promise<void> {
    return this.#run("workers", true, (s) => {
      if (!s.workers.has(worker.id)) for (const [id, w] of s.workers) if (w.expiresAt < worker.heartbeatAt - WORKER_ROWS_KEPT_MS) s.workers.delete(id);
      s.workers.set(worker.id, { ...worker });
    });
  }

  removeWorker(params: { id: string }): Promise<void> {
    return this.#run("workers", true, (s) => void s.workers.delete(params.id));
  }

  listWorkers(params: { now: number; limit: number }): Promise<WorkerRecord[]> {
    return this.#run("workers", true, (s) =>
      [...s.workers.values()]
        .filter((w) => w.expiresAt > params.now)
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
        .slice(0, params.limit)
        .map((w) => ({ ...w })),
    );
  }

  fireSchedule(params: FireScheduleParams): Promise<JobRecord | null> {
    return this.#run("schedules", true, (s) => fireSchedule(s, params, this.name));
  }

  get(params: GetParams): Promise<JobRecord | null> {
    return this.#run("jobs", true, (s) => getJob(s, params.id));
  }

  list(params: ListParams): Promise<JobRecord[]> {
    return this.#run("jobs", true, (s) => listJobs(s, params));
  }

  countJobs(params: CountParams): Promise<number> {
    return this.#run("jobs", true, (s) => countJobs(s, params));
  }

  /** Closes this handle (its later calls are ClosedError, its ready subscriptions end); the state and other handles stay. Idempotent. */
  close(): Promise<void> {
    this.#closed = true;
    for (const listener of this.#listeners) this.#state.readyListeners.delete(listener);
    this.#listeners.clear();
    return Promise.resolve();
  }

  /** See DocketAdapter.onReady: notices of every handle on this state, delivered on the next turn after the call that made jobs ready. */
  onReady(listener: (notice: ReadyNotice) => void): () => void {
    const own = (notice: ReadyNotice) => listener(notice);
    this.#listeners.add(own);
    this.#state.readyListeners.add(own);
    return () => {
      this.#listeners.delete(own);
      this.#state.readyListeners.delete(own);
    };
  }

  /** A one-job guarded write (with its key's promotion when it frees a slot). */
  #write(event: Parameters<typeof transition>[1], key: { id: number; now: number; leaseToken?: string }, set: Parameters<typeof transition>[3]): Promise<JobRecord | null> {
    return this.#run("jobs", true, (s) => transition(s, event, key, set));
  }

  /**
   * Runs `step` on the state at once, synchronously, and settles with its
   * answer or its error: the whole call is one atomic step (a step that
   * throws has changed nothing: each checks its input before writing). A
   * closed handle is ClosedError; an unmigrated state is SCHEMA_MISSING
   * naming `table`.
   */
  #run<T>(table: Table, needsSchema: boolean, step: (state: MemoryState) => T): Promise<T> {
    try {
      if (this.#closed) throw new ClosedError("this adapter");
      if (needsSchema && !this.#state.migrated) throw new SchemaMissingError(table);
      return Promise.resolve(step(this.#state));
    } catch (error) {
      // As the SQL adapters: nothing but a DocketError escapes; anything else is AdapterError with it as `cause`.
      if (error instanceof DocketError) return Promise.reject(error);
      return Promise.reject(new AdapterError(`${this.name}: ${error instanceof Error ? error.message : String(error)}`, { cause: error }));
    }
  }
}

/**
 * A new, empty, unmigrated memory store and a handle on it. Like any store,
 * call `migrate()` (or `docket.migrate()`) once before using it.
 */
export function memoryAdapter(): MemoryAdapter {
  return new MemoryAdapter(emptyState());
}
