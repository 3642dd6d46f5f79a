import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { sqliteAdapter } from "../../src/adapters/sqlite/index.ts";
import type { DocketAdapter } from "../../src/core/adapter.ts";

/** Every statement a better-sqlite3 Database prepares, with the parameters it ran with. */
function recording(db: Database.Database): { db: Database.Database; seen: { sql: string; params: unknown[] }[] } {
  const seen: { sql: string; params: unknown[] }[] = [];
  const wrapped = new Proxy(db, {
    get(target, property) {
      if (property !== "prepare") {
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      }
      return (sql: string) => {
        const statement = target.prepare(sql);
        return new Proxy(statement, {
          get(s, p) {
            const v = Reflect.get(s, p, s) as unknown;
            if (typeof v !== "function") return v;
            return (...params: unknown[]) => {
              if (p === "all" || p === "run" || p === "get" || p === "iterate") seen.push({ sql, params });
              return (v as (...a: unknown[]) => unknown).apply(s, params);
            };
          },
        });
      };
    },
  });
  return { db: wrapped, seen };
}

/** Runs `check` on a migrated store in a file of its own whose statements are recorded (`seen`), then removes it. */
async function onRecordedStore(check: (store: { raw: Database.Database; seen: { sql: string; params: unknown[] }[]; adapter: DocketAdapter }) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "docket-plans-"));
  const raw = new Database(join(dir, "jobs.db"));
  const { db, seen } = recording(raw);
  const adapter: DocketAdapter = sqliteAdapter({ database: db as unknown as never });
  try {
    await adapter.migrate();
    await check({ raw, seen, adapter });
  } finally {
    await adapter.close();
    raw.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * On SQLite the claim, the due-job staging, the
 * expired-lease sweep and the retention purge use indexes, not a full scan of the jobs table, and
 * the claim's UPDATE by ids goes by rowid, whatever the table's size.
 * Checked with EXPLAIN QUERY PLAN on the statements docket really runs, with
 * their real parameters, on a table of 20 000 jobs (not ANALYZEd).
 */
describe("sqlite: query plans", () => {
  it("claim, staging, the lease sweep and the retention purge search an index instead of scanning the jobs table; the claim updates by rowid", async () => {
    await onRecordedStore(async ({ raw, seen, adapter }) => {
      const now = Date.UTC(2030, 0, 1);
      const jobs = Array.from({ length: 20_000 }, (_, i) => ({
        task: `t${i % 7}`,
        queue: `q${i % 3}`,
        payload: "{}",
        state: (i % 4 === 0 ? "scheduled" : "ready") as "scheduled" | "ready",
        priority: i % 5,
        runAt: i % 4 === 0 ? now + (i % 8 === 0 ? -1 : 60_000) : now,
        maxAttempts: 3,
        backoff: null,
        concurrency: i % 10 === 0 ? { key: `k${i % 50}`, limit: 2, onConflict: "block" as const } : null,
      }));
      for (let i = 0; i < jobs.length; i += 1000) await adapter.enqueue({ jobs: jobs.slice(i, i + 1000), now });
      const claimed = await adapter.claim({ queues: ["q1"], limit: 10, now, leaseToken: "tok", leaseExpiresAt: now + 1000 });
      await adapter.claim({ queues: ["q0", "q2"], tasks: ["t1", "t2"], limit: 10, now, leaseToken: "tok2", leaseExpiresAt: now + 1000 });
      expect(claimed.length).toBe(10);
      seen.length = 0;
      await adapter.claim({ queues: ["q1"], limit: 10, now: now + 1, leaseToken: "tok3", leaseExpiresAt: now + 1000 });
      // A worker's claims: no keyed job (all handlers busy), or a few (the one-statement claim's two picks).
      await adapter.claim({ queues: ["q1"], limit: 10, constrainedLimit: 0, now: now + 1, leaseToken: "tok4", leaseExpiresAt: now + 1000 });
      await adapter.claim({ queues: ["q1"], limit: 10, constrainedLimit: 2, now: now + 1, leaseToken: "tok5", leaseExpiresAt: now + 1000 });
      await adapter.listExpired({ now: now + 5_000, limit: 100 });
      await adapter.purge({ states: ["succeeded", "cancelled"], finishedBefore: now, limit: 1000 });
      const jobsTable = "docket_jobs";
      const statements = seen.filter((s) => /^(select|update|with)/i.test(s.sql) && s.sql.includes(`"${jobsTable}"`) && !/count\(\*\)/i.test(s.sql));
      expect(statements.length).toBeGreaterThanOrEqual(7);
      const plans = statements.map((s) => ({
        sql: s.sql,
        plan: (raw.prepare(`EXPLAIN QUERY PLAN ${s.sql}`).all(...(s.params as never[])) as { detail: string }[]).map((r) => r.detail).join(" | "),
      }));
      for (const p of plans) console.log(`${p.plan}\n    ${p.sql.slice(0, 160)}`);
      const scans = plans.filter((p) => new RegExp(`SCAN ${jobsTable}(?! USING)`).test(p.plan));
      expect(scans, "no full scan of the jobs table").toEqual([]);
      // Due-job staging reads a range of run_at in the index of scheduled jobs, not every scheduled job.
      const staging = plans.filter((p) => /"run_at" <= \?/.test(p.sql) && !/^update/i.test(p.sql));
      expect(staging.length).toBeGreaterThanOrEqual(2);
      for (const p of staging) expect(p.plan, `staging searches run_at in the due index: ${p.sql}`).toMatch(/USING (COVERING )?INDEX docket_jobs_due_scheduled \(.*run_at<\?\)/);
      const byIds = plans.filter((p) => /update "docket_jobs" set .* where "id" in \(/i.test(p.sql));
      expect(byIds.length).toBeGreaterThanOrEqual(1);
      for (const p of byIds) expect(p.plan, `an UPDATE by ids goes by rowid: ${p.sql}`).toMatch(/INTEGER PRIMARY KEY/);
    });
  }, 60_000);

  it("a fair queue's claim reads its jobs in tag order through the tag index, and a prioritized one each key's best jobs through the per-key index, not every ready job of the queue", async () => {
    await onRecordedStore(async ({ raw, seen, adapter }) => {
      const now = Date.UTC(2030, 0, 1);
      const job = (key: string, priority = 0) => ({ task: "t", queue: "fair", payload: "{}", state: "ready" as const, priority, runAt: now, maxAttempts: 3, backoff: null, fairness: { key, weight: 1 } });
      for (let i = 0; i < 5_000; i += 1000) await adapter.enqueue({ jobs: Array.from({ length: 1000 }, () => job("flood")), now });
      for (let k = 0; k < 5; k++) await adapter.enqueue({ jobs: [job(`small:${k}`)], now });
      seen.length = 0;
      const plain = await adapter.claim({ queues: ["fair"], limit: 10, now: now + 1, leaseToken: "tok1", leaseExpiresAt: now + 1000 });
      // A prioritized fair queue's claim reads in the controls transaction (fair-claim.ts).
      await adapter.enqueue({ jobs: [job("small:0", 1)], now });
      const prioritized = await adapter.claim({ queues: ["fair"], limit: 10, now: now + 2, leaseToken: "tok2", leaseExpiresAt: now + 1000 });
      // The small keys' jobs come back in the first claim, ahead of the flood's 5,000.
      expect(plain.map((r) => r.fairKey).filter((k) => k !== "flood").sort()).toEqual(["small:0", "small:1", "small:2", "small:3", "small:4"]);
      expect(prioritized.length).toBe(10);
      // A prioritized queue's read of each key's best jobs: through the per-key index, not the queue's every ready job.
      const perKey = seen.filter((s) => /"fair_key" = \?/.test(s.sql));
      expect(perKey.length, "the prioritized claim's read of its keys' best jobs").toBeGreaterThanOrEqual(1);
      for (const s of perKey) {
        const plan = (raw.prepare(`EXPLAIN QUERY PLAN ${s.sql}`).all(...(s.params as never[])) as { detail: string }[]).map((r) => r.detail).join(" | ");
        expect(plan, `a key's best jobs through the per-key index: ${s.sql.slice(0, 200)}`).toMatch(/INDEX docket_jobs_fair \(queue=\? AND fair_key=\?\)/);
        expect(plan, `a key's best jobs read no other key's: ${s.sql.slice(0, 200)}`).not.toMatch(/docket_jobs_claim_by_state/);
      }
      const reads = seen.filter((s) => /order by "fair_tag"/i.test(s.sql));
      expect(reads.length, "the claims' reads in tag order").toBeGreaterThanOrEqual(2);
      for (const s of reads) {
        const plan = (raw.prepare(`EXPLAIN QUERY PLAN ${s.sql}`).all(...(s.params as never[])) as { detail: string }[]).map((r) => r.detail).join(" | ");
        expect(plan, `a read in tag order uses the tag index: ${s.sql.slice(0, 200)}`).toMatch(/INDEX docket_jobs_fair_tag/);
        expect(plan, `a read in tag order sorts nothing: ${s.sql.slice(0, 200)}`).not.toMatch(/TEMP B-TREE FOR ORDER BY/);
      }
    });
  }, 60_000);
});
