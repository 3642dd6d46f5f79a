import { sql, CompiledQuery, type Kysely } from "kysely";
import { describe, expect, it } from "vitest";
import { Docket } from "../src/client/docket.ts";
import { tapDialect } from "../src/testing/kysely/tapped-driver.ts";
import { openTarget, type TargetName } from "./support/targets.ts";
import { settleOne } from "../src/testing/lease-writes.ts";

const HISTORY = 60_000;
const COLUMNS = "task, queue, payload, state, priority, run_at, attempt, max_attempts, created_at, updated_at, finished_at, concurrency_key";

/** `n` jobs that succeeded at `at`, with concurrency key `key` (or none), in one statement of the engine's own SQL. */
function historySql(name: TargetName, n: number, at: number, key: string | null): string {
  const values = `'old', 'default', '{}', 'succeeded', 0, ${at}, 1, 3, ${at}, ${at}, ${at}, ${key === null ? "NULL" : `'${key}'`}`;
  if (name === "sqlite") return `WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < ${n}) INSERT INTO {jobs} (${COLUMNS}) SELECT ${values} FROM g`;
  if (name === "postgres") return `INSERT INTO {jobs} (${COLUMNS}) SELECT ${values} FROM generate_series(1, ${n})`;
  return `INSERT INTO {jobs} (${COLUMNS}) SELECT ${values} FROM seq_1_to_${n}`;
}

/** What one statement read of the jobs table, by the engine's own account; `full` when it scanned the table (or a whole index of it). */
async function readOf(name: TargetName, db: Kysely<any>, jobs: string, q: { sql: string; parameters: readonly unknown[] }): Promise<{ full: string | null; amount: number; unit: string }> {
  if (name === "sqlite") {
    const rows = (await db.executeQuery(CompiledQuery.raw(`EXPLAIN QUERY PLAN ${q.sql}`, [...q.parameters]))).rows as { detail: string }[];
    const full = rows.map((r) => r.detail).find((d) => new RegExp(`SCAN ${jobs}\\b`).test(d) && !new RegExp(`USING (COVERING )?INDEX ${jobs}_(claim|lease|running|due)\\b`).test(d));
    return { full: full ?? null, amount: rows.length, unit: "plan steps" };
  }
  if (name === "postgres") {
    const [row] = (await db.executeQuery(CompiledQuery.raw(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${q.sql}`, [...q.parameters]))).rows as { "QUERY PLAN": { Plan: any }[] }[];
    const plan = row!["QUERY PLAN"][0]!.Plan;
    let full: string | null = null;
    const walk = (node: any) => {
      if (node["Node Type"] === "Seq Scan" && node["Relation Name"] === jobs) full = "Seq Scan";
      for (const child of node.Plans ?? []) walk(child);
    };
    walk(plan);
    return { full, amount: Number(plan["Shared Hit Blocks"]) + Number(plan["Shared Read Blocks"]), unit: "pages" };
  }
  const [row] = (await db.executeQuery(CompiledQuery.raw(`ANALYZE FORMAT=JSON ${q.sql}`, [...q.parameters]))).rows as Record<string, string>[];
  let full: string | null = null;
  let amount = 0;
  const walk = (node: any) => {
    if (node && typeof node === "object") {
      if (node.table_name === jobs) {
        if (node.access_type === "ALL" || node.access_type === "index") full = `access_type ${node.access_type}`;
        amount += Number(node.r_loops ?? 1) * Number(node.r_rows ?? 0);
      }
      for (const v of Object.values(node)) walk(v);
    }
  };
  walk(JSON.parse(Object.values(row!)[0]!));
  return { full, amount, unit: "rows" };
}

/**
 * `stats()` reads "in a bounded number of indexed queries
 * whatever the table size". With 60,000 jobs of history (half of them
 * keyed) beside a few hundred live ones, every statement stats() sends is
 * shown by the engine's own plan to read an index range, not the table:
 * SQLite's EXPLAIN QUERY PLAN, PostgreSQL's EXPLAIN (ANALYZE, BUFFERS),
 * MariaDB's ANALYZE FORMAT=JSON, on the statements docket really sent.
 */
for (const name of ["sqlite", "postgres", "mysql"] as TargetName[]) {
  describe(`${name}: stats query plans`, () => {
    it(`every statement stats() sends reads an index range bounded by the live, dead and recent jobs, not the ${HISTORY.toLocaleString("en")} finished ones`, async (ctx) => {
      const target = await openTarget(name);
      if (!target) return ctx.skip();
      const store = await target.open();
      const sent: { sql: string; parameters: readonly unknown[] }[] = [];
      const adapter = await store.connect({ instrument: { wrapDialect: (d) => tapDialect(d, { query: (s, parameters) => void sent.push({ sql: s, parameters }) }) } });
      const app = await store.application!();
      try {
        await adapter.migrate();
        const d = new Docket({ adapter });
        const old = Date.now() - 2 * 24 * 3600_000;
        await store.execute(historySql(name, HISTORY / 2, old, null));
        await store.execute(historySql(name, HISTORY / 2, old, "account-1"));
        await d.enqueueMany(Array.from({ length: 300 }, (_, i) => ({ task: "live", payload: i })));
        await d.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ task: "live", payload: i, options: { concurrency: { key: `k${i % 5}`, limit: 1 } } })));
        await d.enqueue("later", {}, { delay: 3600_000 });
        const now = Date.now();
        const claimed = await adapter.claim({ queues: ["default"], limit: 10, now, leaseToken: "t", leaseExpiresAt: now + 60_000, worker: "w" });
        for (const j of claimed.slice(0, 3)) await settleOne(adapter, { kind: "fail", id: j.id, leaseToken: "t", now, error: "boom", retryAt: null });
        const jobs = `${store.tablePrefix}jobs`;
        await store.execute(name === "postgres" ? "ANALYZE {jobs}" : name === "mysql" ? "ANALYZE TABLE {jobs}" : "ANALYZE");
        sent.length = 0;
        const stats = await d.stats();
        expect(stats.queues.find((q) => q.queue === "default")?.counts).toMatchObject({ running: 7, dead: 3, blocked: 15 });
        const reads = sent.filter((q) => /^\s*select/i.test(q.sql) && q.sql.includes(jobs));
        expect(reads.length).toBeGreaterThanOrEqual(10);
        const bound = { sqlite: Infinity, postgres: 60, mysql: 2_000 }[name];
        const report: string[] = [];
        for (const q of reads) {
          const r = await readOf(name, app.db, jobs, q);
          report.push(`${r.full ?? "index"} · ${r.amount} ${r.unit} · ${q.sql.replace(/\s+/g, " ").slice(0, 140)}`);
          expect(r.full, `${q.sql}\n${report.join("\n")}`).toBeNull();
          expect(r.amount, `${q.sql}\n${report.join("\n")}`).toBeLessThan(bound);
        }
        console.log(`${name}: stats() with ${HISTORY} finished jobs in the table\n  ${report.join("\n  ")}`);
      } finally {
        await app.close();
        await adapter.close();
        await store.close();
        await target.dispose();
      }
    }, 120_000);
  });
}
