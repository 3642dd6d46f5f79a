/**
 * The conformance harness for adapters built on docket's kysely store:
 * stores whose `connect` takes kysely's instrument seam, and that can hand
 * out an application's own kysely connection. The cases of
 * docket/testing/kysely run on these; the portable cases run on them too.
 */
import type { Kysely } from "kysely";
import type { DocketAdapter } from "../../core/adapter.ts";
import type { InstrumentOptions } from "../../adapters/kysely/engine.ts";
import type { AdapterTarget, CaseContext, ConformanceCase, ConnectOptions, TestStore } from "../harness.ts";

/** ConnectOptions, and the instrumentation passed to the adapter (statement hooks, counters, mutants). */
export interface KyselyConnectOptions extends ConnectOptions {
  instrument?: InstrumentOptions;
}

/** A store of a kysely-based adapter. */
export interface KyselyTestStore extends TestStore<KyselyConnectOptions> {
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
  /**
   * Where the adapter offers `ctx.transaction`'s `{ client }` form
   * (PostgreSQL): one driver connection of the application, idle, with
   * `query(text, values)`, and `release` to give it back. Absent elsewhere:
   * the cases then expect that form to be refused as unsupported.
   */
  client?(): Promise<{ client: object; release(): Promise<void> }>;
  /** Closes the adapter, then the application's kysely instance. */
  close(): Promise<void>;
}

export type KyselyAdapterTarget = AdapterTarget<KyselyTestStore>;
export type KyselyCaseContext = CaseContext<KyselyTestStore>;
export type KyselyConformanceCase = ConformanceCase<KyselyTestStore>;
