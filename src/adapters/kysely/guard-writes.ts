import { sql } from "kysely";
import type { AnyDb } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { labelled } from "./labels.ts";

/** The column a guard write bumps: on every table whose rows guard (queues, tasks, keys, jobs) where locks are local. */
export const GUARD_COLUMN = "guard_seq";

/** Whether this store's row locks guard only on the server that holds them (Engine.locksAreLocal). */
export const locksAreLocal = (ctx: StoreContext): boolean => ctx.engine.locksAreLocal?.() ?? false;

/**
 * Where row locks are local (Engine.locksAreLocal), writes the rows of
 * `table` whose `column` is among `values` (bumps GUARD_COLUMN): the
 * transaction then conflicts, at commit, with every transaction on another
 * server that wrote one of them, and one of the two rolls back (and runs
 * again, see the engine's writeTransaction). Call after the rows' locking
 * read, in the same transaction. Elsewhere writes nothing.
 */
export async function writeGuards(ctx: StoreContext, db: AnyDb, table: string, column: "name" | "id", values: readonly (string | number)[]): Promise<void> {
  if (values.length === 0 || !locksAreLocal(ctx)) return;
  const sorted = [...new Set(values)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  await labelled(db.updateTable(table).set({ [GUARD_COLUMN]: sql`${sql.ref(GUARD_COLUMN)} + 1` }).where(column, "in", sorted), "guard-write").execute();
}
