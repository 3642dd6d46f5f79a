import { sql } from "kysely";
import { SchemaTooNewError } from "../../core/errors.ts";
import type { StoreContext } from "./context.ts";

/**
 * Applies the engine's migrations newer than the stored version, in order,
 * under the engine's migration lock; refuses a schema newer than this code
 * knows (SchemaTooNewError). See DocketAdapter.migrate.
 */
export function migrate(ctx: StoreContext): Promise<{ applied: number[]; version: number }> {
  const { tables, engine } = ctx;
  return engine.withMigrationLock(ctx.db, async (db) => {
    await sql`create table if not exists ${sql.table(tables.migrations)} (version integer primary key)`.execute(db);
    const rows = await db.selectFrom(tables.migrations).select("version").execute();
    const current = rows.reduce((max, r) => Math.max(max, Number(r.version)), 0);
    const all = engine.migrations();
    const latest = all.length === 0 ? 0 : all[all.length - 1]!.version;
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
