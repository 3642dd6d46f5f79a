import type { CompiledQuery } from "kysely";
import type { Engine, AnyDb } from "./engine.ts";
import type { TableNames } from "./identifiers.ts";
import type { FairQueues } from "./fair-queues.ts";
import type { NoticeWindow } from "./notice-window.ts";

/** What every shared module works with: the kysely instance, docket's table names, the engine, the compiled statements. */
export interface StoreContext {
  readonly db: AnyDb;
  readonly tables: TableNames;
  readonly engine: Engine;
  /** Statements compiled once on the store's own kysely instance (see compiledOnce); a context on a caller's instance has a map of its own. */
  readonly statements: Map<string, CompiledQuery>;
  /** The fair queues the store knows (shared by every context of one store). */
  readonly fairQueues: FairQueues;
  /** Ready notices of the store's own autocommit writes (not a caller's transaction's), sent through the engine's window (`Engine.noticeWindowMs`). */
  readonly notices: NoticeWindow;
}

/** Rows per INSERT, and jobs per batched UPDATE. */
export const BATCH_ROWS = 500;
