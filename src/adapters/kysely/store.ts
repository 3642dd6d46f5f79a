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
  PayloadLimitParams,
  PurgeParams,
  PutScheduleParams,
  QueueControl,
  ReadyNotice,
  StoreHealth,
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
  SettleAndHandOffParams,
  SettledJob,
  FencedParams,
  StatsParams,
  StoredControls,
  StoredSchedule,
  StoredStats,
  TaskControl,
} from "../../core/adapter.ts";
import { AdapterError, ClosedError, DocketError, InvalidArgumentError, SchemaMissingError } from "../../core/errors.ts";
import type { JobRecord } from "../../core/job.ts";
import type { AnyDb, Capabilities, Engine, InstrumentOptions } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { tableNames } from "./identifiers.ts";
import { migrate } from "./schema.ts";
import { enqueue, holderOf } from "./enqueue.ts";
import { claim, claimMemory } from "./claim.ts";
import { FLOOR_TUNING, type FloorTuning } from "./claim-floor.ts";
import { freedCapQueues } from "./claim-parts.ts";
import { FREED_SLOT_NOTICE_MS, NoticeWindow } from "./notice-window.ts";
import { transition } from "./guarded-write.ts";
import { CLEAR_LEASE, failureWrite, settle } from "./outcomes.ts";
import { dependenciesOf } from "./dependencies.ts";
import { handsOffInOneStatement, settleAndHandOff } from "./hand-off.ts";
import { extendLeases, heldLeases } from "./leases.ts";
import { listControls, setQueueControl, setTaskControl } from "./controls.ts";
import { readStats } from "./stats.ts";
import { deleteSchedule, fireSchedule, listSchedules, pauseSchedule, putSchedule } from "./schedules.ts";
import { listWorkers, putWorker, removeWorker } from "./workers.ts";
import { countJobs, getJob, listExpired, listJobs } from "./reads.ts";
import { purge } from "./retention.ts";
import { replayDead, replaySet } from "./replay.ts";
import { WorkFailed, completeInTransaction } from "./complete-in-transaction.ts";
import { FairQueues } from "./fairness.ts";
import { repairKeys } from "./repair.ts";
import { payloadLimitWithin } from "./statement-size.ts";

export interface StoreOptions {
  db: AnyDb;
  engine: Engine;
  tablePrefix: string;
  /** Whether `close()` destroys `db` (docket opened it). */
  ownsDb: boolean;
  instrument?: InstrumentOptions;
}

/**
 * The adapter contract (core/adapter.ts) on kysely, for every engine. Each
 * method calls one named module; engine differences reach the modules only
 * through the engine value's capabilities and functions. Every error a
 * method throws is a DocketError (native errors become AdapterError or
 * SchemaMissingError, with the native error as `cause`).
 */
export class KyselyStore implements DocketAdapter {
  readonly name: string;
  readonly capabilities: Capabilities;
  readonly blocking: boolean;
  readonly onReady?: (listener: (notice: ReadyNotice) => void) => () => void;
  readonly health?: () => Promise<StoreHealth>;
  readonly payloadLimit?: (params: PayloadLimitParams) => Promise<number | null>;
  #ctx: StoreContext;
  readonly #claims = claimMemory();
  readonly #floorTuning: FloorTuning;
  /** The transactions this store opened for `completeInTransaction`: `enqueue` takes them as the caller's. */
  readonly #own = new WeakSet<object>();
  readonly #ownsDb: boolean;
  readonly #errorListeners = new Set<(error: DocketError) => void>();
  #closed = false;
  readonly #background = new Set<Promise<void>>();
  readonly #freedSlots = new NoticeWindow(
    FREED_SLOT_NOTICE_MS,
    (notices) => this.#ctx.engine.announceReady(this.#ctx.db, notices),
    (work) => this.#inBackground(work),
  );
  readonly settleAndHandOff?: (params: SettleAndHandOffParams) => Promise<{ settled: (SettledJob | null)[]; claimed: JobRecord[] }>;

  constructor(options: StoreOptions) {
    const engine = options.instrument?.wrapEngine ? options.instrument.wrapEngine(options.engine) : options.engine;
    const notices = new NoticeWindow(
      engine.noticeWindowMs ?? 0,
      (list) => engine.announceReady(options.db, list),
      (work) => this.#inBackground(work),
    );
    this.#ctx = { db: options.db, tables: tableNames(options.tablePrefix), engine, statements: new Map(), fairQueues: new FairQueues(), notices };
    this.#ownsDb = options.ownsDb;
    this.#floorTuning = { ...FLOOR_TUNING, ...options.instrument?.claimFloor };
    this.name = engine.name;
    this.capabilities = engine.capabilities;
    this.blocking = engine.capabilities.blocking;
    if (engine.onReady) this.onReady = (listener) => engine.onReady!(listener);
    if (engine.health) this.health = () => this.#run(() => engine.health!(this.#ctx.db, Object.values(this.#ctx.tables)));
    // Only where the engine hands off in one statement: elsewhere a worker's outcome writes stay plain settles.
    if (handsOffInOneStatement(engine.capabilities)) {
      this.settleAndHandOff = (params) =>
        this.#run(async () => {
          const written = await settleAndHandOff(this.#ctx, this.#claims, params);
          if (params.announceFreed) this.#freedSlots.announce(freedCapQueues(this.#claims, params.items, written.settled, written.claimed).map((queue) => ({ queue, due: false })));
          return written;
        });
    }
    if (engine.maxStatementBytes) {
      this.payloadLimit = (params) =>
        this.#run(async () => {
          const db = params.transaction === undefined ? this.#ctx.db : await this.#adopt(params.transaction);
          return payloadLimitWithin(await engine.maxStatementBytes!(db));
        });
    }
  }

  /**
   * Forgets what this store remembers of the database between calls (the
   * fair queues and their clocks, the caps met lately): for tests that empty
   * docket's tables under a live store. docket itself never deletes a queue's
   * row, so in use what a store remembers stays true.
   */
  forgetRemembered(): void {
    this.#ctx = { ...this.#ctx, fairQueues: new FairQueues() };
    this.#claims.capsSeenAt = Number.NEGATIVE_INFINITY;
    this.#claims.untaggedLookedAt = Number.NEGATIVE_INFINITY;
    this.#claims.untaggedFoundAt = Number.NEGATIVE_INFINITY;
    this.#claims.rateQueues.clear();
    this.#claims.capped.queues.clear();
    this.#claims.capped.tasks.clear();
  }

  migrate(): Promise<MigrateResult> {
    return this.#run(() => migrate(this.#ctx));
  }

  enqueue(params: EnqueueParams): Promise<EnqueuedRecord[]> {
    return this.#run(async () => {
      const background = (work: Promise<void>) => this.#inBackground(work);
      if (params.transaction === undefined) return enqueue(this.#ctx, params, background);
      // The caller's transaction is the unit of work: every statement runs in it, and it commits or not.
      const db = await this.#adopt(params.transaction);
      const engine: Engine = { ...this.#ctx.engine, writeTransaction: (_db, fn) => fn(db), writeStatement: (_db, fn) => fn(db) };
      return enqueue({ ...this.#ctx, db, engine, statements: new Map() }, params, background);
    });
  }

  /**
   * A kysely instance on the caller's open transaction. InvalidArgumentError, before anything is written, when
   * `transaction` is not one: a Kysely outside a transaction, or (engines that take driver clients) a pool or a
   * client with no transaction open, on which the jobs would be committed one statement at a time.
   */
  async #adopt(transaction: object): Promise<AnyDb> {
    if (this.#own.has(transaction)) return transaction as AnyDb;
    // What the engine knows of its server before its first transaction, known before the caller's is written to.
    await this.#ctx.engine.knowServer?.(this.#ctx.db);
    const t = transaction as Partial<AnyDb>;
    if (typeof t.selectFrom === "function" && typeof t.insertInto === "function") {
      if (t.isTransaction !== true) throw new InvalidArgumentError(`${this.name}: transaction must be an open kysely Transaction, got a Kysely instance outside one`);
      return transaction as AnyDb;
    }
    const adopted = (await this.#ctx.engine.adoptClient?.(transaction)) ?? null;
    if (adopted !== null && "refused" in adopted) {
      throw new InvalidArgumentError(`${this.name}: transaction must be an open kysely Transaction or a driver client inside BEGIN; ${adopted.refused}`);
    }
    if (adopted) return adopted;
    throw new InvalidArgumentError(`${this.name}: transaction must be an open kysely Transaction${this.#ctx.engine.adoptClient ? " or a driver client inside BEGIN" : ""}`);
  }

  claim(params: ClaimParams): Promise<JobRecord[]> {
    return this.#run(() => claim(this.#ctx, this.#claims, params, (work) => this.#inBackground(work), this.#floorTuning));
  }

  extendLeases(params: ExtendLeasesParams): Promise<LeaseKey[]> {
    return this.#run(() => extendLeases(this.#ctx, params));
  }

  setProgress(params: SetProgressParams): Promise<JobRecord | null> {
    return this.#run(() => transition(this.#ctx, "heartbeat", params, { progress: params.progress }));
  }

  recordStep(params: RecordStepParams): Promise<JobRecord | null> {
    return this.#run(() => transition(this.#ctx, "heartbeat", params, { steps: params.steps }));
  }

  heldLeases(params: HeldLeasesParams): Promise<LeaseKey[]> {
    return this.#run(() => heldLeases(this.#ctx, params));
  }

  async completeInTransaction(params: FencedParams, work: (transaction: object) => Promise<string | null>, options?: { client?: object }): Promise<SettledJob> {
    try {
      return await this.#run(() => completeInTransaction(this.#ctx, this.#own, params, work, options?.client));
    } catch (error) {
      throw error instanceof AdapterError && error.cause instanceof WorkFailed ? error.cause.error : error;
    }
  }

  dependencies(params: { id: number }): Promise<Dependencies> {
    return this.#run(() => dependenciesOf(this.#ctx, params.id));
  }

  settle(params: SettleParams): Promise<(SettledJob | null)[]> {
    return this.#run(async () => {
      const results = await settle(this.#ctx, params);
      if (params.announceFreed) this.#freedSlots.announce(freedCapQueues(this.#claims, params.items, results).map((queue) => ({ queue, due: false })));
      return results;
    });
  }

  listExpired(params: ListExpiredParams): Promise<JobRecord[]> {
    return this.#run(() => listExpired(this.#ctx, params));
  }

  expire(params: ExpireParams): Promise<JobRecord | null> {
    const w = failureWrite(this.#ctx.engine, params, "expireRetry", "expireBury");
    return this.#run(() => transition(this.#ctx, w.event, params, w.set));
  }

  cancel(params: CancelParams): Promise<JobRecord | null> {
    return this.#run(() => transition(this.#ctx, "cancel", params, { ...CLEAR_LEASE, finished_at: params.now }));
  }

  replay(params: ReplayParams): Promise<JobRecord | null> {
    return this.#run(async () => {
      const record = await transition(this.#ctx, "replay", params, replaySet(params.now, params.resetSteps === true));
      // The replayed job is live before its key is made active again: no claim clears the key in between.
      if (record) await this.#ctx.engine.announceReady(this.#ctx.db, [{ queue: record.queue, due: true }]);
      return record;
    });
  }

  runNow(params: RunNowParams): Promise<JobRecord | null> {
    return this.#run(async () => {
      const record = await transition(this.#ctx, "runNow", params, { run_at: params.now });
      if (record) await this.#ctx.engine.announceReady(this.#ctx.db, [{ queue: record.queue, due: true }]);
      return record;
    });
  }

  replayDead(params: ReplayDeadParams): Promise<JobRecord[]> {
    return this.#run(() => replayDead(this.#ctx, params));
  }

  setQueueControl(params: SetQueueControlParams): Promise<QueueControl> {
    return this.#run(() => setQueueControl(this.#ctx, params));
  }

  setTaskControl(params: SetTaskControlParams): Promise<TaskControl> {
    return this.#run(() => setTaskControl(this.#ctx, params));
  }

  listControls(): Promise<StoredControls> {
    return this.#run(() => listControls(this.#ctx));
  }

  purge(params: PurgeParams): Promise<number> {
    return this.#run(() => purge(this.#ctx, params));
  }

  repairKeys(params: RepairKeysParams): Promise<string[]> {
    return this.#run(() => repairKeys(this.#ctx, params));
  }

  putSchedule(params: PutScheduleParams): Promise<StoredSchedule> {
    return this.#run(() => putSchedule(this.#ctx, params));
  }

  listSchedules(): Promise<StoredSchedule[]> {
    return this.#run(() => listSchedules(this.#ctx));
  }

  deleteSchedule(params: DeleteScheduleParams): Promise<boolean> {
    return this.#run(() => deleteSchedule(this.#ctx, params.name));
  }

  pauseSchedule(params: { name: string; paused: boolean; now: number; lastTick?: number }): Promise<StoredSchedule | null> {
    return this.#run(() => pauseSchedule(this.#ctx, params));
  }

  putWorker(worker: WorkerRecord): Promise<void> {
    return this.#run(() => putWorker(this.#ctx, worker));
  }

  removeWorker(params: { id: string }): Promise<void> {
    return this.#run(() => removeWorker(this.#ctx, params.id));
  }

  listWorkers(params: { now: number; limit: number }): Promise<WorkerRecord[]> {
    return this.#run(() => listWorkers(this.#ctx, params));
  }

  fireSchedule(params: FireScheduleParams): Promise<JobRecord | null> {
    return this.#run(() => fireSchedule(this.#ctx, params, (work) => this.#inBackground(work)));
  }

  stats(params: StatsParams): Promise<StoredStats> {
    // One snapshot for every count and list: totals that add up while jobs move.
    return this.#run(() => (this.#ctx.engine.snapshotRead ? this.#ctx.engine.snapshotRead(this.#ctx.db, (db) => readStats({ ...this.#ctx, db }, params)) : readStats(this.#ctx, params)));
  }

  get(params: GetParams): Promise<JobRecord | null> {
    return this.#run(() => getJob(this.#ctx, params.id));
  }

  getByIdempotencyKey(params: GetByIdempotencyKeyParams): Promise<JobRecord | null> {
    return this.#run(() => holderOf(this.#ctx, this.#ctx.db, params.key));
  }

  list(params: ListParams): Promise<JobRecord[]> {
    return this.#run(() => listJobs(this.#ctx, params));
  }

  countJobs(params: CountParams): Promise<number> {
    return this.#run(() => countJobs(this.#ctx, params));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#freedSlots.clear();
    // Notices still being sent, and those owed to writes that committed, go out before the connections close.
    while (this.#background.size > 0) await Promise.allSettled([...this.#background]);
    this.#ctx.notices.flush();
    while (this.#background.size > 0) await Promise.allSettled([...this.#background]);
    if (this.#ownsDb) await this.#ctx.db.destroy();
    await this.#ctx.engine.close();
  }

  /** See DocketAdapter.onError. */
  onError(listener: (error: DocketError) => void): () => void {
    this.#errorListeners.add(listener);
    return () => void this.#errorListeners.delete(listener);
  }

  /** Runs `work` without holding up the call that started it: its failure is reported (`onError`), and `close()` waits for it. */
  #inBackground(work: Promise<void>): void {
    const tracked = work.catch((error) => this.reportBackgroundError(error)).finally(() => this.#background.delete(tracked));
    this.#background.add(tracked);
  }

  /** Hands an error that happened outside any call (a pool's, a listener's) to every `onError` listener; never throws. */
  reportBackgroundError(error: unknown): void {
    const mapped = this.#toDocketError(error);
    for (const listener of this.#errorListeners) {
      try {
        listener(mapped);
      } catch {
        // A listener's failure must not turn a handled error into an unhandled one.
      }
    }
  }

  /** Runs one call of the contract: ClosedError once `close()` was called; the database's errors as typed errors. */
  async #run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#closed) throw new ClosedError("this adapter");
    try {
      return await fn();
    } catch (error) {
      throw this.#toDocketError(error);
    }
  }

  /** A missing table becomes SchemaMissingError, other native errors AdapterError; both keep the native error as `cause`. */
  #toDocketError(error: unknown): DocketError {
    if (error instanceof DocketError) return error;
    const missing = this.#ctx.engine.missingTable(error);
    if (missing !== null) return new SchemaMissingError(missing, { cause: error });
    const message = error instanceof Error ? error.message : String(error);
    return new AdapterError(`${this.name}: ${message}`, { cause: error });
  }
}
