/** Setup for the scale benchmarks: filler jobs inserted straight into a store's table. */
import type { StoreSpec } from "./databases.ts";

/**
 * Inserts `n` filler jobs straight into the store's table (one SQL
 * statement; the benchmark's setup, not docket's API), with concurrency
 * key `key` when given (a plain name).
 */
export async function fill(spec: StoreSpec, n: number, state: "ready" | "succeeded", now: number, key: string | null = null): Promise<void> {
  const jobs = `${spec.prefix}jobs`;
  const finished = state === "succeeded" ? String(now) : "NULL";
  const cols = "task, queue, payload, state, priority, run_at, attempt, max_attempts, created_at, updated_at, finished_at, concurrency_key";
  const vals = `'noop', 'default', '{}', '${state}', 1, ${now}, 0, 3, ${now}, ${now}, ${finished}, ${key === null ? "NULL" : `'${key}'`}`;
  if (spec.adapter === "sqlite") {
    const Database = (await import("better-sqlite3")).default;
    const db = new Database(spec.location);
    db.exec(`WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < ${n}) INSERT INTO ${jobs} (${cols}) SELECT ${vals} FROM g`);
    db.close();
  } else if (spec.adapter === "postgres") {
    const pg = (await import("pg")).default;
    const c = new pg.Client({ connectionString: spec.location });
    await c.connect();
    await c.query(`INSERT INTO ${jobs} (${cols}) SELECT ${vals} FROM generate_series(1, ${n})`);
    // A table that grew over time has been vacuumed and checkpointed: do both now, so the drain measured
    // does not share the machine with the first vacuum of a million fresh rows and the checkpoint they cause.
    await c.query(`VACUUM (ANALYZE) ${jobs}`);
    await c.query("CHECKPOINT").catch(() => undefined);
    await c.end();
  } else {
    const mysql = (await import("mysql2/promise")).default;
    const c = await mysql.createConnection({ uri: spec.location });
    for (let done = 0; done < n; done += 100_000) {
      await c.query(`INSERT INTO ${jobs} (${cols}) SELECT ${vals} FROM seq_1_to_${Math.min(100_000, n - done)}`);
    }
    await c.query(`ANALYZE TABLE ${jobs}`);
    await c.end();
  }
}
