import type { Engine, AnyDb } from "./engine.ts";
import type { TableNames } from "./identifiers.ts";

/** What every shared module works with: the kysely instance, docket's table names, the engine. */
export interface StoreContext {
  readonly db: AnyDb;
  readonly tables: TableNames;
  readonly engine: Engine;
}

/** Rows per INSERT, and jobs per batched UPDATE. */
export const BATCH_ROWS = 500;
