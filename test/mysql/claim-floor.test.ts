import mysql from "mysql2/promise";
import { afterAll, describe, expect, it } from "vitest";
import { mysqlAdapter, type FloorEvent } from "../../src/adapters/mysql/index.ts";
import type { ClaimParams, DocketAdapter } from "../../src/core/adapter.ts";
import { Docket } from "../../src/index.ts";
import { tapDialect } from "../../src/testing/kysely/tapped-driver.ts";
import { createMysqlTestDatabase, dropMysqlDatabase } from "../support/targets.ts";

const created = await createMysqlTestDatabase("docket_claim_floor", "the MariaDB claim floor tests");
const url = created?.url ?? null;
afterAll(async () => {
  if (created) await dropMysqlDatabase(created.database);
});

let lease = 0;
const claimOf = (adapter: DocketAdapter, limit: number, extra: Partial<ClaimParams> = {}) =>
  adapter.claim({ queues: ["q"], limit, constrainedLimit: limit, now: Date.now(), leaseToken: `t${++lease}`, leaseExpiresAt: Date.now() + 60_000, ...extra });

/** A session holding a consistent snapshot open (InnoDB's purge waits for it), as a forgotten session does. */
async function holdSnapshot(): Promise<mysql.Connection> {
  const holder = await mysql.createConnection({ uri: url! });
  await holder.query("START TRANSACTION WITH CONSISTENT SNAPSHOT");
  return holder;
}

/** Every claim counts as slow: the floor is on from the first claim. */
const ON_AT_ONCE = { slowMs: 0, slowClaims: 1, confirmMs: 0, offMs: 0, lagMs: 0 };

/**
 * The claim floor (src/adapters/kysely/claim-floor.ts) on MariaDB, whose
 * claims all run in the controls transaction (controls-claim.ts): its
 * candidate read of a queue with no control of its own starts at the floor,
 * written term by term (MariaDB starts a range at that form, not at a row
 * value).
 */
describe.skipIf(!url)("mysql: the claim floor", () => {
  it("claims read from the floor (a range scan of the ready index starting there) and still take every job once, in claim order", async () => {
    const holder = await holdSnapshot();
    const reads: { sql: string; parameters: readonly unknown[] }[] = [];
    const wrapDialect = (d: Parameters<typeof tapDialect>[0]) => tapDialect(d, { query: (sql, parameters) => void ((sql.includes("docket:claim-candidates") || sql.includes("docket:claim-window")) && reads.push({ sql, parameters })) });
    const adapter = mysqlAdapter({ uri: url!, tablePrefix: "f1_", instrument: { wrapDialect, claimFloor: { ...ON_AT_ONCE, checkMs: 50, checkFactor: 1 } } });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      const ids = (await docket.enqueueMany(Array.from({ length: 60 }, (_, i) => ({ task: "t", payload: { i }, options: { queue: "q" } })))).map((j) => j.id);
      const claimed: number[] = [];
      for (let k = 0; k < 7; k++) claimed.push(...(await claimOf(adapter, 10)).map((j) => j.id));
      expect(claimed).toEqual(ids);
      const floored = reads.filter((r) => r.sql.includes("`priority` > ? or (`priority` = ? and `run_at` > ?)"));
      expect(floored.length).toBeGreaterThan(0);
      // Read unlocked, told to range over the ready index (migration 25; with 90,000 claimed jobs' entries kept by the snapshot,
      // MariaDB's own choice was a ref on (state, queue) with the bound as a filter: Engine.forcedIndex); then the
      // window's rows locked by primary key (a locked read of the claim index there visited 480,000 pages).
      let lockedById = 0;
      for (const r of floored) {
        expect(r.sql).toContain("force index (`f1_jobs_ready`)");
        expect(r.sql).toContain("`ready_queue` in (?)");
        expect(r.sql).toContain("docket:claim-window");
        expect(r.sql).not.toContain("for update");
        const next = reads[reads.indexOf(r) + 1];
        if (next === undefined || !next.sql.includes("docket:claim-candidates")) continue;
        expect(next.sql).toContain("force index (primary)");
        expect(next.sql).toContain("for update skip locked");
        lockedById++;
      }
      expect(lockedById).toBeGreaterThan(0);
      // The read as sent, explained: a range of the ready index (not a `ref` scan of the queue's ready jobs, filtered).
      const explainer = await mysql.createConnection({ uri: url! });
      try {
        const read = floored[floored.length - 1]!;
        const [plan] = (await explainer.query(`EXPLAIN ${read.sql}`, read.parameters as unknown[])) as unknown as [{ table: string; type: string; key: string | null }[]];
        expect(plan.find((p) => p.table === "f1_jobs")).toMatchObject({ type: "range", key: "f1_jobs_ready" });
      } finally {
        await explainer.end();
      }
    } finally {
      await holder.query("ROLLBACK").catch(() => {});
      await holder.end();
      await adapter.close();
    }
  }, 30_000);

  it("under a held snapshot, a floored window read that finds fewer rows than its LIMIT reads as many pages after 7,000 jobs claimed and finished since as after 1,000", async () => {
    const holder = await holdSnapshot();
    let window: { sql: string; parameters: readonly unknown[] } | null = null;
    const wrapDialect = (d: Parameters<typeof tapDialect>[0]) => tapDialect(d, { query: (sql, parameters) => void (sql.includes("docket:claim-window") && (window = { sql, parameters })) });
    const adapter = mysqlAdapter({ uri: url!, tablePrefix: "f6_", instrument: { wrapDialect, claimFloor: { ...ON_AT_ONCE, checkMs: 3_600_000, checkFactor: 1 } } });
    const explainer = await mysql.createConnection({ uri: url! });
    /** Enqueues `n` jobs, claims and completes them all, then reads the last window read (the claim that found none) again: its pages accessed. */
    const churn = async (n: number): Promise<number> => {
      for (let i = 0; i < n; i += 1000) await docket.enqueueMany(Array.from({ length: 1000 }, (_, k) => ({ task: "t", payload: { k }, options: { queue: "q" } })));
      for (;;) {
        const got = await claimOf(adapter, 500);
        if (got.length === 0) break;
        await adapter.settle({ items: got.map((j) => ({ kind: "complete" as const, id: j.id, leaseToken: j.leaseToken!, now: Date.now(), result: null })) });
      }
      expect(window).not.toBeNull();
      const [rows] = (await explainer.query(`ANALYZE FORMAT=JSON ${window!.sql}`, window!.parameters as unknown[])) as unknown as [Record<string, string>[]];
      return [...JSON.stringify(rows).matchAll(/pages_accessed\\?":\s*(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
    };
    const docket = new Docket({ adapter });
    try {
      await docket.migrate();
      const early = await churn(1000);
      const late = await churn(6000);
      if (process.env.SHOW_PAGES) console.log(`pages ${early} ${late}`);
      expect(early).toBeGreaterThan(0);
      // The claim index (state, queue, …) put the later jobs' delete-marked 'running' entries after the queue's ready
      // ones, and the read went through them (forced to it: 17 then 59 pages after 1,000 and 7,000 jobs; the ready index 9 and 7).
      expect(late).toBeLessThanOrEqual(early + 10);
    } finally {
      await holder.query("ROLLBACK").catch(() => {});
      await holder.end();
      await explainer.end();
      await adapter.close();
    }
  }, 120_000);

  it("concurrent floored claims on separate connections (windows read unlocked, rows locked by id) claim every job exactly once and leave none ready", async () => {
    const holder = await holdSnapshot();
    const tuning = { claimFloor: { ...ON_AT_ONCE, checkMs: 50, checkFactor: 1 } };
    const adapters = Array.from({ length: 4 }, () => mysqlAdapter({ uri: url!, tablePrefix: "f5_", instrument: tuning }));
    try {
      const docket = new Docket({ adapter: adapters[0]! });
      await docket.migrate();
      const ids = (await docket.enqueueMany(Array.from({ length: 400 }, (_, i) => ({ task: "t", payload: { i }, options: { queue: "q" } })))).map((j) => j.id);
      const claimed: number[] = [];
      await Promise.all(
        adapters.map(async (adapter, k) => {
          for (let empty = 0; empty < 3; ) {
            const got = await claimOf(adapter, 7 + k * 4);
            claimed.push(...got.map((j) => j.id));
            empty = got.length === 0 ? empty + 1 : 0;
          }
        }),
      );
      expect(new Set(claimed).size).toBe(claimed.length);
      expect([...claimed].sort((a, b) => a - b)).toEqual(ids);
    } finally {
      await holder.query("ROLLBACK").catch(() => {});
      await holder.end();
      for (const a of adapters) await a.close();
    }
  }, 60_000);

  it("a job that becomes ready below the floor (a higher priority, an older run time) is claimed after the floor's check", async () => {
    const holder = await holdSnapshot();
    const events: FloorEvent[] = [];
    const observe = (e: FloorEvent) => void events.push(e);
    const adapter = mysqlAdapter({ uri: url!, tablePrefix: "f2_", instrument: { claimFloor: { ...ON_AT_ONCE, checkMs: 50, checkFactor: 1, observe } } });
    const other = mysqlAdapter({ uri: url!, tablePrefix: "f2_" });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      await docket.enqueueMany(Array.from({ length: 200 }, (_, i) => ({ task: "t", payload: { i }, options: { queue: "q" } })));
      await claimOf(adapter, 5);
      await claimOf(adapter, 5); // the floor is now at the backlog's sixth job
      const urgent = await new Docket({ adapter: other }).enqueue("t", { urgent: true }, { queue: "q", priority: -1 });
      const late = await new Docket({ adapter: other }).enqueue("t", { late: true }, { queue: "q", runAt: new Date(Date.now() - 60_000) });
      const seen: number[] = [];
      const deadline = Date.now() + 5_000;
      while (!(seen.includes(urgent.id) && seen.includes(late.id)) && Date.now() < deadline) {
        seen.push(...(await claimOf(adapter, 1)).map((j) => j.id));
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(seen).toContain(urgent.id);
      expect(seen).toContain(late.id);
      expect(events[0]).toMatchObject({ queue: "q", change: "on" });
      expect(events.some((e) => e.change === "lowered" && e.floor?.priority === -1 && typeof e.checkMs === "number")).toBe(true);
      for (;;) {
        const more = await claimOf(adapter, 50);
        if (more.length === 0) break;
        seen.push(...more.map((j) => j.id));
      }
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen.length + 10).toBe(202);
    } finally {
      await holder.query("ROLLBACK").catch(() => {});
      await holder.end();
      await adapter.close();
      await other.close();
    }
  }, 30_000);

  it("a claim that leaves a capped task's job ready moves the floor no further than it: the job is taken once its slot frees, without a check", async () => {
    const holder = await holdSnapshot();
    // Checks an hour apart: the capped job must be reached without one.
    const adapter = mysqlAdapter({ uri: url!, tablePrefix: "f3_", instrument: { claimFloor: { ...ON_AT_ONCE, checkMs: 3_600_000, checkFactor: 1 } } });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      await docket.setTaskCap("capped", 1);
      // A minute before the others: a claim of them alone would move the floor past these two.
      const runAt = new Date(Date.now() - 60_000);
      const first = await docket.enqueue("capped", { n: 1 }, { queue: "q", runAt });
      const second = await docket.enqueue("capped", { n: 2 }, { queue: "q", runAt });
      await docket.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ task: "t", payload: { i }, options: { queue: "q" } })));
      // The floor turns on with this claim, which takes the capped task's one slot and passes its second job over.
      const a = await claimOf(adapter, 5);
      expect(a.map((j) => j.id)).toContain(first.id);
      expect(a.map((j) => j.id)).not.toContain(second.id);
      expect((await claimOf(adapter, 5)).map((j) => j.id)).not.toContain(second.id);
      const running = a.find((j) => j.id === first.id)!;
      await adapter.settle({ items: [{ kind: "complete", id: running.id, leaseToken: running.leaseToken!, now: Date.now(), result: null }] });
      expect((await claimOf(adapter, 1)).map((j) => j.id)).toEqual([second.id]);
    } finally {
      await holder.query("ROLLBACK").catch(() => {});
      await holder.end();
      await adapter.close();
    }
  }, 30_000);

  it("a claim with no room for keyed jobs moves the floor no further than the first keyed job it passed over", async () => {
    const holder = await holdSnapshot();
    const adapter = mysqlAdapter({ uri: url!, tablePrefix: "f4_", instrument: { claimFloor: { ...ON_AT_ONCE, checkMs: 3_600_000, checkFactor: 1 } } });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      const keyed = await docket.enqueue("t", { keyed: true }, { queue: "q", concurrency: { key: "k", limit: 1 }, runAt: new Date(Date.now() - 60_000) });
      await docket.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ task: "t", payload: { i }, options: { queue: "q" } })));
      const unkeyedOnly = await claimOf(adapter, 5, { constrainedLimit: 0 });
      expect(unkeyedOnly.some((j) => j.id === keyed.id)).toBe(false);
      expect((await claimOf(adapter, 5, { constrainedLimit: 0 })).length).toBe(5);
      expect((await claimOf(adapter, 1)).map((j) => j.id)).toEqual([keyed.id]);
    } finally {
      await holder.query("ROLLBACK").catch(() => {});
      await holder.end();
      await adapter.close();
    }
  }, 30_000);
});
