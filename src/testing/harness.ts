import type { DocketAdapter } from "../core/adapter.ts";
import { ManualClock } from "../core/clock.ts";
import { Docket, type DocketOptions, type TaskMap } from "../client/docket.ts";
import type { InstrumentOptions } from "../adapters/kysely/engine.ts";
import type { Kysely } from "kysely";

/**
 * One isolated, empty store (its own table prefix, schema or database) on
 * which a test can open several connections.
 */
export interface TestStore {
  /** The table prefix the store's adapters use. */
  readonly tablePrefix: string;
  /** Where the store lives (a SQLite file, a server URL), for tests that open it from another process. Optional. */
  readonly location?: string;
  /**
   * A new adapter on its own connection (pool of its own) to this store. Not
   * migrated. `instrument` is passed to the adapter (statement hooks in race tests).
   */
  connect(options?: ConnectOptions): Promise<DocketAdapter>;
  /** Runs one raw statement on an admin connection; `{jobs}` is replaced by the jobs table name. */
  execute(sql: string): Promise<void>;
  /** Closes the admin connection and drops what the store created. */
  close(): Promise<void>;
  /**
   * What an application holds beside docket: its own kysely instance on the
   * store's database, and an adapter to this store set up to work with it
   * (on SQLite, sharing its database handle), not migrated. The transaction
   * cases need it; a target without it fails them.
   */
  application?(): Promise<ApplicationConnection>;
}

export interface ApplicationConnection {
  // deno-lint-ignore no-explicit-any
  readonly db: Kysely<any>;
  readonly adapter: DocketAdapter;
  /**
   * The application's driver-level handles that hold no open transaction
   * (its pool, one of its connections, its database handle), each labelled,
   * and `release` to give back what was borrowed. The transaction cases pass
   * each as `transaction:` and expect a refusal; a target without it fails them.
   */
  outsideTransaction?(): Promise<{ handles: [label: string, handle: object][]; release(): Promise<void> }>;
  /** Closes the adapter, then the application's kysely instance. */
  close(): Promise<void>;
}

/** Options every adapter factory accepts. */
export interface ConnectOptions {
  instrument?: InstrumentOptions;
  /** Another table prefix than the store's (cases that check how a prefix is validated). */
  tablePrefix?: string;
}

/**
 * What a case may need beyond the DocketAdapter contract:
 * - "sql": raw statements on the store (`t.execute`, e.g. an admin edit the
 *   contract has no call for) or an application's own kysely connection
 *   (`store.application()`, enqueue in the caller's transaction);
 * - "statementHooks": kysely's instrument seam (`connect({ instrument })`:
 *   statement hooks that hold a session at a statement, statement counts,
 *   and the mutants that remove a guard by rewriting queries);
 * - "processes": the store opened from another process (`store.location`).
 */
export const CASE_NEEDS = ["sql", "statementHooks", "processes"] as const;
export type CaseNeed = (typeof CASE_NEEDS)[number];

/** A storage under test: makes fresh stores. A third-party adapter provides one of these. */
export interface AdapterTarget {
  readonly name: string;
  /**
   * The needs (CASE_NEEDS) its stores meet; cases that need anything else
   * are skipped by the runners. Absent: every need (a kysely SQL adapter).
   */
  readonly provides?: readonly CaseNeed[];
  open(): Promise<TestStore>;
}

/** The needs of `testCase` that `target` does not provide (empty: the case runs on it). */
export function unmetNeeds(target: AdapterTarget, testCase: ConformanceCase): CaseNeed[] {
  if (target.provides === undefined) return [];
  return (testCase.needs ?? []).filter((need) => !target.provides!.includes(need));
}

/** What every conformance case receives. */
export interface CaseContext {
  /** An adapter on the case's fresh store, migrated unless the case is `unmigrated`. */
  readonly adapter: DocketAdapter;
  /** Time as the case controls it; `docket()` uses it. */
  readonly clock: ManualClock;
  /** A Docket on `adapter` and `clock`. */
  docket<T extends TaskMap = TaskMap>(options?: Omit<DocketOptions<T>, "adapter">): Docket<T>;
  /** Another adapter on its own connection to the same store; closed when the case ends. */
  connect(options?: ConnectOptions): Promise<DocketAdapter>;
  /** A raw admin statement on the store (see TestStore.execute). */
  execute(sql: string): Promise<void>;
  readonly store: TestStore;
}

export interface ConformanceCase {
  /** Reads as behaviour: "claim › does not claim a job scheduled in the future". */
  readonly name: string;
  /** Cases that run handlers on real timers take longer; runners may give them a longer timeout. */
  readonly slow?: boolean;
  /** When true, the case's adapter is NOT migrated before `run`. */
  readonly unmigrated?: boolean;
  /** What it needs beyond the adapter contract (see CASE_NEEDS); runners skip it on a target that does not provide one. */
  readonly needs?: readonly CaseNeed[];
  run(t: CaseContext): Promise<void>;
}

/**
 * Runs one case on a fresh store of `target`: opens, migrates, runs, and
 * always closes every connection it opened. Runner-agnostic: throws on
 * failure, and at once when the target does not meet the case's needs
 * (runners skip those: see `unmetNeeds`).
 */
export async function runCase(target: AdapterTarget, testCase: ConformanceCase): Promise<void> {
  const unmet = unmetNeeds(target, testCase);
  if (unmet.length > 0) throw new Error(`${testCase.name}: needs ${unmet.join(", ")}, which the ${target.name} target does not provide (skip it)`);
  const store = await target.open();
  const opened: DocketAdapter[] = [];
  try {
    const adapter = await store.connect();
    opened.push(adapter);
    if (!testCase.unmigrated) await adapter.migrate();
    const clock = new ManualClock();
    const context: CaseContext = {
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
