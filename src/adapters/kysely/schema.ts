import { sql } from "kysely";
import { SchemaTooNewError } from "../../core/errors.ts";
import type { StoreContext } from "./context.ts";

/**
 * Applies the engine's migrations newer than the stored version, in order,
 * under the engine's migration lock; refuses a schema newer than this code
 * knows (SchemaTooNewError). See DocketAdapter.migrate.
 *
 * The stored version is read first, without the lock: when it is already
 * the latest, nothing else is sent (no lock, no DDL), so a role with only
 * SELECT/INSERT/UPDATE/DELETE can call it. Otherwise the version is read
 * again under the lock, which serializes migrators across processes.
 */
export async function migrate(ctx: StoreContext): Promise<{ applied: number[]; version: number }> {
  const { tables, engine } = ctx;
  const all = engine.migrations();
  const latest = all.length === 0 ? 0 : all[all.length - 1]!.version;
  const seen = await storedVersion(ctx, ctx.db);
  if (seen !== null && seen > latest) throw new SchemaTooNewError(seen, latest);
  if (seen === latest) return { applied: [], version: latest };
  return engine.withMigrationLock(ctx.db, async (db) => {
    await sql`create table if not exists ${sql.table(tables.migrations)} (version integer primary key)`.execute(db);
    const current = (await storedVersion(ctx, db)) ?? 0;
    if (current > latest) throw new SchemaTooNewError(current, latest);
    const applied: number[] = [];
    for (const m of all) {
      if (m.version <= current) continue;
      for (const statement of m.statements) await sql.raw(statement).execute(db);
      await db.insertInto(tables.migrations).values({ version: m.version }).execute();
      applied.push(m.version);
    }
    return { applied, version: Math.max(current, latest) };
  });
}

/** The highest applied version (0 when none is), or null when the migrations table does not exist. */
async function storedVersion(ctx: StoreContext, db: StoreContext["db"]): Promise<number | null> {
  try {
    const rows = await db.selectFrom(ctx.tables.migrations).select("version").execute();
    return rows.reduce((max, r) => Math.max(max, Number(r.version)), 0);
  } catch (error) {
    if (ctx.engine.missingTable(error) !== null) return null;
    throw error;
  }
}
