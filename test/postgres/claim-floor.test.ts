import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { postgresAdapter, type FloorEvent } from "../../src/adapters/postgres/index.ts";
import type { ClaimParams, DocketAdapter } from "../../src/core/adapter.ts";
import { Docket } from "../../src/index.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../support/targets.ts";

const created = await createPgTestDatabase("docket_claim_floor", "the claim floor tests");
const url = created?.url ?? null;
afterAll(async () => {
  if (created) await dropPgDatabase(PG_URL, created.database);
});

let lease = 0;
const claimOf = (adapter: DocketAdapter, limit: number, extra: Partial<ClaimParams> = {}) =>
  adapter.claim({ queues: ["q"], limit, constrainedLimit: limit, now: Date.now(), leaseToken: `t${++lease}`, leaseExpiresAt: Date.now() + 60_000, ...extra });

/** A session holding the MVCC horizon back, as a forgotten psql session does. */
async function holdHorizon(): Promise<pg.Client> {
  const holder = new pg.Client({ connectionString: url! });
  await holder.connect();
  await holder.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
  await holder.query("SELECT txid_current()");
  return holder;
}

/**
 * The claim floor (src/adapters/kysely/claim-floor.ts) on PostgreSQL, the
 * engine whose index scans start at a row value. Its thresholds are lowered
 * so that every claim from the head counts as slow: the floor is on from the
 * first claim, and checks run every 50 ms.
 */
describe.skipIf(!url)("postgres: the claim floor", () => {
  it("claims start at the floor (the statement carries the bound) and still take every job once, in claim order", async () => {
    const holder = await holdHorizon();
    const statements: string[] = [];
    const pool = recordingPool(statements);
    const adapter = postgresAdapter({ pool, tablePrefix: "f1_", instrument: { claimFloor: { slowMs: 0, slowClaims: 1, confirmMs: 0, offMs: 0, lagMs: 0, checkMs: 50, checkFactor: 1 } } });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      const ids = (await docket.enqueueMany(Array.from({ length: 60 }, (_, i) => ({ task: "t", payload: { i }, options: { queue: "q" } })))).map((j) => j.id);
      const claimed: number[] = [];
      for (let k = 0; k < 7; k++) claimed.push(...(await claimOf(adapter, 10)).map((j) => j.id));
      expect(claimed).toEqual(ids);
      expect(statements.filter((s) => s.includes("docket:claim") && s.includes('("priority", "run_at", "id") >=')).length).toBeGreaterThan(0);
    } finally {
      await holder.query("ROLLBACK").catch(() => {});
      await holder.end();
      await adapter.close();
      await pool.end();
    }
  }, 30_000);

  it("a job that becomes ready below the floor (a higher priority, a late commit) is claimed after the floor's check", async () => {
    const holder = await holdHorizon();
    const events: FloorEvent[] = [];
    const observe = (e: FloorEvent) => void events.push(e);
    const adapter = postgresAdapter({ connectionString: url!, tablePrefix: "f2_", instrument: { claimFloor: { slowMs: 0, slowClaims: 1, confirmMs: 0, offMs: 0, lagMs: 0, checkMs: 50, checkFactor: 1, observe } } });
    const other = postgresAdapter({ connectionString: url!, tablePrefix: "f2_" });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      await docket.enqueueMany(Array.from({ length: 200 }, (_, i) => ({ task: "t", payload: { i }, options: { queue: "q" } })));
      await claimOf(adapter, 5);
      await claimOf(adapter, 5); // the floor is now at the backlog's sixth job
      // Below the floor: a job of a higher priority, and one enqueued in a transaction begun before the backlog's claims (an older run time).
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
      // Observed: the floor turned on at the backlog's first job, and a check lowered it to the urgent job.
      expect(events[0]).toMatchObject({ queue: "q", change: "on" });
      expect(events.some((e) => e.change === "lowered" && e.floor?.priority === -1 && typeof e.checkMs === "number")).toBe(true);
      // Everything else is still claimed once.
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

  it("a claim in flight while a check lowers the floor does not raise it again: the job the check found is the next claimed", async () => {
    const holder = await holdHorizon();
    const events: FloorEvent[] = [];
    const observe = (e: FloorEvent) => void events.push(e);
    const gated = gatedPool();
    // Checks are due a second after the floor turns on, then a second after each check: the claims' `now` decides when.
    const adapter = postgresAdapter({ pool: gated.pool, tablePrefix: "f7_", instrument: { claimFloor: { slowMs: 0, slowClaims: 1, confirmMs: 0, offMs: 0, lagMs: 0, checkMs: 1_000, checkFactor: 1, observe } } });
    const other = postgresAdapter({ connectionString: url!, tablePrefix: "f7_" });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      await docket.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ task: "t", payload: { i }, options: { queue: "q" } })));
      const t = Date.now();
      await claimOf(adapter, 1, { now: t }); // the floor turns on at the backlog
      const late = await new Docket({ adapter: other }).enqueue("t", { late: true }, { queue: "q", runAt: new Date(t - 60_000) });
      // Claim A takes a backlog job; its result is held back while claim B's check lowers the floor to the late job.
      const release = gated.holdNextClaim();
      const a = claimOf(adapter, 1, { now: t });
      await gated.held;
      expect((await claimOf(adapter, 1, { now: t + 2_000 })).map((j) => j.id)).not.toContain(late.id);
      for (let i = 0; i < 200 && !events.some((e) => e.change === "lowered"); i++) await new Promise((r) => setTimeout(r, 10));
      expect(events.some((e) => e.change === "lowered" && e.floor?.id === late.id)).toBe(true);
      release();
      expect((await a).map((j) => j.id)).not.toContain(late.id);
      // No check is due before t + 3,000: only the floor the check left can lead this claim to the late job.
      expect((await claimOf(adapter, 1, { now: t + 2_500 })).map((j) => j.id)).toEqual([late.id]);
    } finally {
      await holder.query("ROLLBACK").catch(() => {});
      await holder.end();
      await adapter.close();
      await other.close();
      await gated.pool.end();
    }
  }, 30_000);

  it("a claim with no room for keyed jobs moves the floor no further than the first keyed job it passed over", async () => {
    const holder = await holdHorizon();
    // Checks an hour apart: the keyed job must be reached without one.
    const adapter = postgresAdapter({ connectionString: url!, tablePrefix: "f3_", instrument: { claimFloor: { slowMs: 0, slowClaims: 1, confirmMs: 0, offMs: 0, lagMs: 0, checkMs: 3_600_000, checkFactor: 1 } } });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      const keyed = await docket.enqueue("t", { keyed: true }, { queue: "q", concurrency: { key: "k", limit: 1 } });
      await docket.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ task: "t", payload: { i }, options: { queue: "q" } })));
      // The floor turns on with this claim, which takes the unkeyed jobs after the keyed one.
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

  it("an enqueue that commits after claims passed its place, within the floor's lag, is taken by the next claim (no check needed)", async () => {
    const holder = await holdHorizon();
    const adapter = postgresAdapter({ connectionString: url!, tablePrefix: "f4_", instrument: { claimFloor: { slowMs: 0, slowClaims: 1, confirmMs: 0, offMs: 0, lagMs: 60_000, checkMs: 3_600_000, checkFactor: 1 } } });
    const client = new pg.Client({ connectionString: url! });
    await client.connect();
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      await client.query("BEGIN");
      const late = await docket.enqueue("t", { late: true }, { queue: "q", transaction: client });
      await docket.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ task: "t", payload: { i }, options: { queue: "q" } })));
      expect((await claimOf(adapter, 5)).length).toBe(5); // the floor is on, a minute before the first job
      expect((await claimOf(adapter, 5)).length).toBe(5);
      await client.query("COMMIT");
      expect((await claimOf(adapter, 1)).map((j) => j.id)).toEqual([late.id]);
    } finally {
      await client.end();
      await holder.query("ROLLBACK").catch(() => {});
      await holder.end();
      await adapter.close();
    }
  }, 30_000);

  it("fewer slow claims in a row than slowClaims leave the floor off: a higher priority enqueued after them is the next job claimed", async () => {
    const adapter = postgresAdapter({ connectionString: url!, tablePrefix: "f5_", instrument: { claimFloor: { slowMs: 0, slowClaims: 3, confirmMs: 0, offMs: 0, lagMs: 0, checkMs: 3_600_000, checkFactor: 1 } } });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      await docket.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ task: "t", payload: { i }, options: { queue: "q" } })));
      await claimOf(adapter, 2);
      await claimOf(adapter, 2);
      const urgent = await docket.enqueue("t", { urgent: true }, { queue: "q", priority: -1 });
      expect((await claimOf(adapter, 1)).map((j) => j.id)).toEqual([urgent.id]);
      // The third slow claim in a row (the one above) turned it on, at the urgent job: a job of a higher priority still waits for a check.
      const next = await docket.enqueue("t", { urgent: true }, { queue: "q", priority: -2 });
      expect((await claimOf(adapter, 1)).map((j) => j.id)).not.toEqual([next.id]);
    } finally {
      await adapter.close();
    }
  }, 30_000);

  it("slow claims turn the floor on only after a read of the head at least confirmMs slow: with a head that reads faster, a higher priority is still the next job claimed", async () => {
    const events: FloorEvent[] = [];
    const observe = (e: FloorEvent) => void events.push(e);
    const adapter = postgresAdapter({ connectionString: url!, tablePrefix: "f8_", instrument: { claimFloor: { slowMs: 0, slowClaims: 1, confirmMs: 3_600_000, offMs: 0, lagMs: 0, checkMs: 3_600_000, checkFactor: 1, observe } } });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      await docket.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ task: "t", payload: { i }, options: { queue: "q" } })));
      for (let k = 0; k < 4; k++) {
        await claimOf(adapter, 2);
        await new Promise((r) => setTimeout(r, 20)); // the confirming read (in the background) ends
      }
      const urgent = await docket.enqueue("t", { urgent: true }, { queue: "q", priority: -1 });
      expect((await claimOf(adapter, 1)).map((j) => j.id)).toEqual([urgent.id]);
      expect(events).toEqual([]);
    } finally {
      await adapter.close();
    }
  }, 30_000);

  it("a check that finds nothing below the floor turns it off only when faster than offMs", async () => {
    const holder = await holdHorizon();
    const runs: Record<string, FloorEvent[]> = {};
    try {
      for (const [name, offMs] of [["kept", 0], ["dropped", 3_600_000]] as const) {
        const events: FloorEvent[] = (runs[name] = []);
        const observe = (e: FloorEvent) => void events.push(e);
        const adapter = postgresAdapter({ connectionString: url!, tablePrefix: `f6${name[0]}_`, instrument: { claimFloor: { slowMs: 0, slowClaims: 1, confirmMs: 0, offMs, lagMs: 0, checkMs: 20, checkFactor: 1, observe } } });
        try {
          const docket = new Docket({ adapter });
          await docket.migrate();
          await docket.enqueueMany(Array.from({ length: 100 }, (_, i) => ({ task: "t", payload: { i }, options: { queue: "q" } })));
          // Claims a few at a time for half a second: checks come due every 20 ms and find nothing below the floor.
          const until = Date.now() + 500;
          while (Date.now() < until) {
            await claimOf(adapter, 2);
            await new Promise((r) => setTimeout(r, 25));
          }
        } finally {
          await adapter.close();
        }
      }
      expect(runs.kept![0]).toMatchObject({ change: "on" });
      expect(runs.kept!.some((e) => e.change === "off")).toBe(false);
      expect(runs.dropped!.some((e) => e.change === "off")).toBe(true);
    } finally {
      await holder.query("ROLLBACK").catch(() => {});
      await holder.end();
    }
  }, 30_000);
});

/** A pool whose clients record the text of every statement they send. */
function recordingPool(into: string[]): pg.Pool {
  const pool = new pg.Pool({ connectionString: url!, max: 4 });
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const first = args[0] as string | { text?: string };
      into.push(typeof first === "string" ? first : (first.text ?? ""));
      return query(...args);
    };
  });
  return pool;
}

/**
 * A pool whose next claim statement, once `holdNextClaim` is called, runs
 * and commits at the server but returns its rows to the adapter only when
 * the returned function is called (`held` resolves when the statement has
 * been sent): a claim kept in flight.
 */
function gatedPool(): { pool: pg.Pool; holdNextClaim: () => () => void; held: Promise<void> } {
  const pool = new pg.Pool({ connectionString: url!, max: 4 });
  let gate: Promise<void> | null = null;
  let sent: () => void = () => {};
  const state = {
    pool,
    held: Promise.resolve(),
    holdNextClaim: () => {
      let open: () => void = () => {};
      gate = new Promise<void>((r) => (open = r));
      state.held = new Promise<void>((r) => (sent = r));
      return open;
    },
  };
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const first = args[0] as string | { text?: string };
      const text = typeof first === "string" ? first : (first.text ?? "");
      const result = query(...args);
      if (gate === null || !text.includes("docket:claim */")) return result;
      const wait = gate;
      gate = null;
      sent();
      return result.then(async (rows) => (await wait, rows));
    };
  });
  return state;
}
