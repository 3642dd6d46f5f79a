import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { sqliteAdapter } from "../../src/adapters/sqlite/index.ts";
import { migrations } from "../../src/adapters/sqlite/migrations.ts";

/** Version 20 rebuilds the jobs table (SQLite cannot alter a CHECK): nothing stored before may be lost or change. */
describe("sqlite: the migration that adds the waiting state", () => {
  it("keeps every row, the id sequence past purged jobs, every index and its planner statistics, and then stores waiting jobs", async () => {
    const dir = mkdtempSync(join(tmpdir(), "docket-v20-"));
    const file = join(dir, "jobs.db");
    const database = new Database(file);
    try {
      const prefix = "docket_";
      database.exec(`create table ${prefix}migrations (version integer primary key)`);
      const before = migrations(prefix).filter((m) => m.version < 20);
      for (const m of before) {
        for (const statement of m.statements) database.exec(statement);
        database.prepare(`insert into ${prefix}migrations (version) values (?)`).run(m.version);
      }
      const indexes = () => database.prepare(`select name, sql from sqlite_schema where type = 'index' and tbl_name = '${prefix}jobs' and sql is not null order by name`).all();
      const indexesBefore = indexes();
      const stats = () => database.prepare(`select tbl, idx, stat from sqlite_stat1 order by tbl, idx`).all();
      const statsBefore = stats();
      const insert = database.prepare(
        `insert into ${prefix}jobs (task, queue, payload, state, priority, run_at, attempt, max_attempts, created_at, updated_at, finished_at, concurrency_key, steps) values (?, 'default', ?, ?, 0, 1, 0, 3, 1, 1, ?, ?, ?)`,
      );
      insert.run("a", '{"n":1}', "ready", null, "k1", null);
      insert.run("b", '{"n":2}', "succeeded", 5, null, '[{"name":"s","result":1,"at":2}]');
      insert.run("c", '{"n":3}', "dead", 5, null, null);
      database.prepare(`delete from ${prefix}jobs where task = 'c'`).run(); // a purged job: its id is never given again
      const rowsBefore = database.prepare(`select * from ${prefix}jobs order by id`).all();

      const adapter = sqliteAdapter({ database });
      const { applied } = await adapter.migrate();
      // Version 20 and the later ones (21 adds started_at to jobs; 22 and 23 touch other tables).
      expect(applied).toEqual(migrations(prefix).filter((m) => m.version >= 20).map((m) => m.version));
      const rowsAfter = database.prepare(`select * from ${prefix}jobs order by id`).all() as Record<string, unknown>[];
      expect(rowsAfter.map(({ waiting_on: _w, has_children: _h, started_at: _s, ...r }) => r)).toEqual(rowsBefore);
      expect(rowsAfter.every((r) => r.waiting_on === 0 && r.has_children === 0 && r.started_at === null)).toBe(true);
      expect(indexes()).toEqual(indexesBefore);
      expect(stats(), "the fixed planner statistics").toEqual(statsBefore);
      expect(database.pragma("integrity_check", { simple: true })).toBe("ok");

      const [parent] = await adapter.enqueue({ jobs: [{ task: "p", queue: "default", payload: "{}", state: "ready", priority: 0, runAt: 1, maxAttempts: 3, backoff: null }], now: 1 });
      expect(parent!.id).toBe(4);
      const [child] = await adapter.enqueue({ jobs: [{ task: "c", queue: "default", payload: "{}", state: "ready", priority: 0, runAt: 1, maxAttempts: 3, backoff: null, after: { ids: [parent!.id], refs: [] } }], now: 1 });
      expect(child!.state).toBe("waiting");
      await adapter.close();
    } finally {
      database.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
