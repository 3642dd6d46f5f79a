import { afterAll, describe, expect, it } from "vitest";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import { FAIR_CLOCK_TTL_MS } from "../../src/adapters/kysely/fair-queues.ts";
import { Docket } from "../../src/index.ts";
import { StatementCounter } from "../../src/testing/kysely/statement-counter.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../support/targets.ts";

const created = await createPgTestDatabase("docket_fair_clock", "the postgres fair clock tests");
const url = created?.url ?? null;
afterAll(async () => {
  if (created) await dropPgDatabase(PG_URL, created.database);
});

/** Counts the reads of a fair queue's clock (the smallest tag of its ready jobs). */
class ClockReads extends StatementCounter {
  reads = 0;
  override count(sql: string): void {
    super.count(sql);
    if (/select "fair_tag" as "m" from/.test(sql)) this.reads++;
  }
}

/**
 * A fair enqueue on PostgreSQL is one statement that needs the queue's
 * clock, read at most every FAIR_CLOCK_TTL_MS. Enqueues on the store's pool
 * that find it stale at once share one read: under a flood of small
 * producers, each stale moment cost one read per producer waiting (628 reads
 * of 1-2 ms in 8 s in bench/fairness.ts, against 80 stale moments).
 */
describe.skipIf(!url)("postgres: a fair queue's clock", () => {
  it("40 fair enqueues at once on a stale clock send 1 read of it (3 rounds), and all 40 are stored with their keys", async () => {
    const counter = new ClockReads();
    const adapter = postgresAdapter({ connectionString: url!, tablePrefix: "fc1_", max: 20, instrument: { wrapDialect: (d) => counter.wrap(d) } });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      await docket.enqueue("t", null, { queue: "f", fairness: { key: "first" } });
      const rounds: number[] = [];
      for (let round = 0; round < 3; round++) {
        await new Promise((r) => setTimeout(r, FAIR_CLOCK_TTL_MS + 20));
        counter.reads = 0;
        const jobs = await Promise.all(Array.from({ length: 40 }, (_, k) => docket.enqueue("t", { k }, { queue: "f", fairness: { key: `k${k}` } })));
        expect(jobs.every((j) => j.created)).toBe(true);
        rounds.push(counter.reads);
      }
      expect(rounds.join(",")).toBe("1,1,1");
      const stored = await docket.list({ queue: "f", limit: 200 });
      expect(stored.length).toBe(121);
      expect(stored.every((j) => j.fairKey !== null)).toBe(true);
    } finally {
      await adapter.close();
    }
  });

  it("a fair enqueue in a caller's transaction reads the clock on the caller's connection, beside enqueues sharing a read on the pool", async () => {
    const pg = (await import("pg")).default;
    const counter = new ClockReads();
    const adapter = postgresAdapter({ connectionString: url!, tablePrefix: "fc2_", max: 2, instrument: { wrapDialect: (d) => counter.wrap(d) } });
    const client = new pg.Client({ connectionString: url! });
    await client.connect();
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      await docket.enqueue("t", null, { queue: "f", fairness: { key: "first" } });
      await new Promise((r) => setTimeout(r, FAIR_CLOCK_TTL_MS + 20));
      await client.query("BEGIN");
      const pool = Array.from({ length: 6 }, (_, k) => docket.enqueue("t", { k }, { queue: "f", fairness: { key: `p${k}` } }));
      const inTransaction = docket.enqueue("t", { k: "tx" }, { queue: "f", fairness: { key: "tx" }, transaction: client });
      const all = await Promise.all([...pool, inTransaction]);
      await client.query("COMMIT");
      expect(all.every((j) => j.created)).toBe(true);
      const { rows } = await client.query("select count(*)::int as n, count(fair_tag)::int as tagged from fc2_jobs where queue = 'f'");
      expect(rows[0]).toEqual({ n: 8, tagged: 8 });
      // One read shared by the six on the pool, one of the caller's connection's own.
      expect(counter.reads).toBe(2);
    } finally {
      await client.end();
      await adapter.close();
    }
  });
});
