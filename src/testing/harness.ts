/**
 * The portable conformance harness: what a target, a store and a case are,
 * and `runCase`. It needs a DocketAdapter and nothing else (no SQL, no
 * query builder); the cases that need the SQL store's instrument seam or an
 * application's own query-builder connection are in the kit's SQL entry.
 */
import type { DocketAdapter } from "../core/adapter.ts";
import { ManualClock } from "../core/clock.ts";
import { Docket, type DocketOptions, type TaskMap } from "../client/docket.ts";

/**
 * One isolated, empty store (its own table prefix, schema or database) on
 * which a test can open several connections. `O`: what its `connect`
 * accepts beyond ConnectOptions (the SQL entry's stores take an `instrument`).
 */
export interface TestStore<O extends ConnectOptions = ConnectOptions> {
  /** The table prefix the store's adapters use. */
  readonly tablePrefix: string;
  /** Where the store lives (a SQLite file, a server URL), for tests that open it from another process. Optional. */
  readonly location?: string;
  /** A new adapter on its own connection (pool of its own) to this store. Not migrated. */
  connect(options?: O): Promise<DocketAdapter>;
  /** Runs one raw statement on an admin connection; `{jobs}` is replaced by the jobs table name. */
  execute(sql: string): Promise<void>;
  /** Closes the admin connection and drops what the store created. */
  close(): Promise<void>;
}

/** Options every adapter factory accepts. */
export interface ConnectOptions {
  /** Another table prefix than the store's (cases that check how a prefix is validated). */
  tablePrefix?: string;
}

/** What `connect` of a store of type `S` accepts. */
export type ConnectOptionsOf<S extends TestStore> = S extends TestStore<infer O> ? O : never;

/**
 * What a case may need beyond the DocketAdapter contract:
 * - "sql": raw statements on the store (`t.execute`, e.g. an admin edit the
 *   contract has no call for), or an application's own SQL connection;
 * - "processes": the store opened from another process (`store.location`).
 * (Cases that hold a session at a statement, count statements or remove a
 * guard by rewriting queries need the SQL store's instrument seam: they are
 * in the kit's SQL entry, typed for its stores, and run only there.)
 */
export const CASE_NEEDS = ["sql", "processes"] as const;
export type CaseNeed = (typeof CASE_NEEDS)[number];

/** A storage under test: makes fresh stores of type `S`. A third-party adapter provides one of these. */
export interface AdapterTarget<S extends TestStore = TestStore> {
  readonly name: string;
  /**
   * The needs (CASE_NEEDS) its stores meet; cases that need anything else
   * are skipped by the runners. Absent: every need (a SQL adapter).
   */
  readonly provides?: readonly CaseNeed[];
  open(): Promise<S>;
}

/** The needs of `testCase` that `target` does not provide (empty: the case runs on it). */
export function unmetNeeds<S extends TestStore>(target: AdapterTarget<S>, testCase: ConformanceCase<S>): CaseNeed[] {
  if (target.provides === undefined) return [];
  return (testCase.needs ?? []).filter((need) => !target.provides!.includes(need));
}

/** What every conformance case receives, on a store of type `S`. */
export interface CaseContext<S extends TestStore = TestStore> {
  /** An adapter on the case's fresh store, migrated unless the case is `unmigrated`. */
  readonly adapter: DocketAdapter;
  /** Time as the case controls it; `docket()` uses it. */
  readonly clock: ManualClock;
  /** A Docket on `adapter` and `clock`. */
  docket<T extends TaskMap = TaskMap>(options?: Omit<DocketOptions<T>, "adapter">): Docket<T>;
  /** Another adapter on its own connection to the same store; closed when the case ends. */
  connect(options?: ConnectOptionsOf<S>): Promise<DocketAdapter>;
  /** A raw admin statement on the store (see TestStore.execute). */
  execute(sql: string): Promise<void>;
  readonly store: S;
}

/** A case for stores of type `S` (a portable case: any TestStore). */
export interface ConformanceCase<S extends TestStore = TestStore> {
  /** Reads as behaviour: "claim › does not claim a job scheduled in the future". */
  readonly name: string;
  /** Cases that run handlers on real timers take longer; runners may give them a longer timeout. */
  readonly slow?: boolean;
  /** A case that drains a large backlog on real timers: its time limit in ms (over `slow`'s), for a slow database server. */
  readonly timeoutMs?: number;
  /** When true, the case's adapter is NOT migrated before `run`. */
  readonly unmigrated?: boolean;
  /** What it needs beyond the adapter contract (see CASE_NEEDS); runners skip it on a target that does not provide one. */
  readonly needs?: readonly CaseNeed[];
  run(t: CaseContext<S>): Promise<void>;
}

/**
 * Runs one case on a fresh store of `target`: opens, migrates, runs, and
 * always closes every connection it opened. Runner-agnostic: throws on
 * failure, and at once when the target does not meet the case's needs
 * (runners skip those: see `unmetNeeds`).
 */
export async function runCase<S extends TestStore>(target: AdapterTarget<S>, testCase: ConformanceCase<S>): Promise<void> {
  const unmet = unmetNeeds(target, testCase);
  if (unmet.length > 0) throw new Error(`${testCase.name}: needs ${unmet.join(", ")}, which the ${target.name} target does not provide (skip it)`);
  const store = await target.open();
  const opened: DocketAdapter[] = [];
  try {
    const adapter = await store.connect();
    opened.push(adapter);
    if (!testCase.unmigrated) await adapter.migrate();
    const clock = new ManualClock();
    const context: CaseContext<S> = {
      adapter,
      clock,
      store,
      docket: (options) => new Docket({ ...options, adapter, clock }),
      connect: async (options) => {
        const extra = await store.connect(options);
        opened.push(extra);
        return extra;
      },
      execute: (sql) => store.execute(sql),
    };
    await testCase.run(context);
  } finally {
    for (const a of opened) await a.close().catch(() => undefined);
    await store.close();
  }
}
