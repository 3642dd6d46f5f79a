/**
 * Gates that let a fast-check scheduler decide the order in which
 * statements of several simulated workers are sent (the property suite's
 * concurrent schedules). Storage-agnostic: a statement is a label and a
 * `send` function; the SQL entry's `scheduledDialect` gates a SQL driver's
 * statements through it.
 */

/**
 * The subset of fast-check's `Scheduler` the gates use (kept structural so
 * this module does not import fast-check).
 */
export interface GateScheduler {
  schedule<T>(task: Promise<T>, label?: string, metadata?: unknown, customAct?: (f: () => Promise<void>) => Promise<void>): Promise<T>;
}

/**
 * Decides when a released statement has "settled", i.e. when the scheduler
 * may release the next gate: when the statement finished, or when it is
 * known (or presumed) to wait for another transaction's lock.
 * `connectionId` is what `identify` returned for the connection.
 */
export type SettleStrategy = (statement: Promise<unknown>, connectionId: unknown) => Promise<void>;

/** Settles when the statement finishes. Right for SQLite (synchronous driver, waits happen in the process write queue). */
export const settleOnFinish: SettleStrategy = (statement) => statement.then(
  () => undefined,
  () => undefined,
);

/** Settles when the statement finishes or after `ms` (presumed blocked on a lock). MariaDB/MySQL: ~5–10 ms. */
export function settleWithin(ms: number): SettleStrategy {
  return (statement) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      statement.then(
        () => (clearTimeout(timer), resolve()),
        () => (clearTimeout(timer), resolve()),
      );
    });
}

/**
 * Settles when the statement finishes, or as soon as `isWaiting(id)` says the
 * connection waits for a lock (polled every `intervalMs`). PostgreSQL: ask
 * `pg_stat_activity` from an ungated connection. `maxMs` bounds the wait.
 */
export function settleByPolling(isWaiting: (connectionId: unknown) => Promise<boolean>, intervalMs = 2, maxMs = 2_000): SettleStrategy {
  return async (statement, connectionId) => {
    let done = false;
    const finished = statement.then(
      () => void (done = true),
      () => void (done = true),
    );
    const deadline = Date.now() + maxMs;
    while (!done && Date.now() < deadline) {
      await Promise.race([finished, sleep(intervalMs)]);
      if (done) return;
      if (await isWaiting(connectionId).catch(() => false)) return;
    }
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** One released gate, in release order. */
export interface ReleasedStatement {
  readonly connection: string;
  readonly operation: string;
  readonly statement: string;
}

interface PendingGate {
  release(): void;
}

/**
 * Owns the gates of every scheduled connection of one test environment.
 * `scheduler` is mutable: set it to a fast-check scheduler for a run and back
 * to null (ungated) for setup, assertions and resets. Each connection records
 * the operation it is running (`setOperation`) so that gate labels read
 * `w1 claim#2 › update "jobs" set …`.
 */
export class StatementScheduler {
  scheduler: GateScheduler | null = null;
  /** Called when a gate opens, before its statement is sent (the history uses it to time an operation's first statement). */
  onRelease: ((connection: string) => void) | null = null;
  /** Labels of released gates, in release order (cleared by `reset`). */
  readonly released: ReleasedStatement[] = [];
  readonly #operations = new Map<string, string>();
  readonly #pending = new Set<PendingGate>();
  readonly #ids = new Map<string, unknown>();
  /** Statements released earlier that settled while still running (waiting for a lock). */
  readonly #blocked = new Set<{ p: Promise<unknown>; id: unknown; done: boolean }>();
  #aborted = false;

  /**
   * @param settle decides when a released statement settled.
   * @param graceMs how long a statement that was waiting for a lock gets to finish after each later statement.
   */
  constructor(
    readonly settle: SettleStrategy = settleOnFinish,
    readonly graceMs = 5,
  ) {}

  setOperation(connection: string, operation: string): void {
    this.#operations.set(connection, operation);
  }

  /** The id `identify` returned for a connection label (a backend pid, a thread id), if any. */
  connectionId(connection: string): unknown {
    return this.#ids.get(connection);
  }

  /** @internal */
  recordConnectionId(connection: string, id: unknown): void {
    this.#ids.set(connection, id);
  }

  /** Starts a run: clears the log, re-arms gates, installs the scheduler. */
  begin(scheduler: GateScheduler): void {
    this.released.length = 0;
    this.#blocked.clear();
    this.#aborted = false;
    this.scheduler = scheduler;
  }

  /** Ends a run: gating off. */
  end(): void {
    this.scheduler = null;
  }

  /**
   * Recovery after a run timeout: every waiting gate opens at once and new
   * statements run ungated until the next `begin`.
   */
  abort(): void {
    this.#aborted = true;
    this.scheduler = null;
    for (const g of [...this.#pending]) g.release();
    this.#pending.clear();
  }

  get pendingGates(): number {
    return this.#pending.size;
  }

  /** Runs `send` once the scheduler releases this statement's gate; the release waits until it settles. */
  async gate<T>(connection: string, statement: string, send: () => Promise<T>): Promise<T> {
    const s = this.scheduler;
    if (s === null || this.#aborted) return send();
    const operation = this.#operations.get(connection) ?? "?";
    const label = `${connection} ${operation} › ${statement}`;
    let settled: () => void = () => undefined;
    const settledP = new Promise<void>((r) => (settled = r));
    let opened: () => void = () => undefined;
    const openedP = new Promise<void>((r) => (opened = r));
    const pending: PendingGate = { release: () => (opened(), settled()) };
    this.#pending.add(pending);
    s.schedule(Promise.resolve(undefined), label, undefined, async (f) => {
      await f();
      opened();
      await settledP;
    }).catch(() => undefined);
    await openedP;
    this.#pending.delete(pending);
    if (!this.#aborted) {
      this.released.push({ connection, operation, statement });
      this.onRelease?.(connection);
    }
    const p = send();
    if (this.#aborted) settled();
    else void this.#settleAll(p, this.#ids.get(connection)).then(settled, settled);
    return p;
  }

  /**
   * This statement settles; then every statement that settled earlier while
   * still waiting for a lock gets a short grace to finish (the lock may just
   * have been released) and settles again, so that what happens next does
   * not depend on how fast the server wakes a waiter: runs replay.
   */
  async #settleAll(p: Promise<unknown>, id: unknown): Promise<void> {
    const entry = { p, id, done: false };
    void p.then(
      () => void (entry.done = true),
      () => void (entry.done = true),
    );
    await this.settle(p, id);
    await Promise.resolve();
    for (const b of [...this.#blocked]) {
      if (!b.done) {
        await Promise.race([b.p.catch(() => undefined), sleep(this.graceMs)]);
        if (!b.done) await this.settle(b.p, b.id);
      }
      if (b.done) this.#blocked.delete(b);
    }
    if (!entry.done) this.#blocked.add(entry);
    // Let a finished statement's worker reach its next gate before the scheduler picks again.
    for (let i = 0; i < 20; i++) await Promise.resolve();
  }
}
