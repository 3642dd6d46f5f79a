import { afterAll, describe, expect, it } from "vitest";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import { Docket } from "../../src/index.ts";
import { arrayRuns } from "../../src/adapters/kysely/array-insert.ts";
import type { NewJob } from "../../src/core/adapter.ts";
import { StatementCounter } from "../../src/testing/kysely/statement-counter.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../support/targets.ts";

const pg = (await import("pg")).default;
const created = await createPgTestDatabase("docket_batch", "the postgres batch enqueue tests");
const url = created?.url ?? null;
afterAll(async () => {
  if (created) await dropPgDatabase(PG_URL, created.database);
});

/** A StatementCounter that also keeps the text of every statement sent. */
class RecordingCounter extends StatementCounter {
  readonly texts: string[] = [];
  override count(sql: string): void {
    super.count(sql);
    this.texts.push(sql);
  }
}

const inserts = (texts: readonly string[]) => texts.filter((t) => /^\s*insert\b/i.test(t));

/**
 * A batch of unkeyed jobs is ONE INSERT on PostgreSQL, whatever its size
 * (array parameters, one per column), with no BEGIN/COMMIT; the records it
 * returns, built from the values written and the ids the rows got, are the
 * stored rows, in input order.
 */
describe.skipIf(!url)("postgres: batch enqueue", () => {
  it("enqueueMany of 2,000 unkeyed jobs sends 1 insert and no transaction; its records are the stored jobs, in input order", async () => {
    const counter = new RecordingCounter();
    const adapter = postgresAdapter({ connectionString: url!, tablePrefix: "b1_", instrument: { wrapDialect: (d) => counter.wrap(d) } });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      counter.reset();
      counter.texts.length = 0;
      const jobs = await docket.enqueueMany(
        Array.from({ length: 2000 }, (_, i) => ({
          task: i % 3 === 0 ? "a" : "b",
          payload: { i, text: i % 7 === 0 ? 'quote " backslash \\ comma , braces {} null NULL é' : null },
          options: { priority: i % 5, ...(i % 11 === 0 ? { delay: 60_000 } : {}), ...(i % 13 === 0 ? { timeoutMs: 5_000 } : {}), queue: i % 2 ? "q1" : "q2" },
        })),
      );
      const sentByEnqueue = inserts(counter.texts).length;
      expect(`${sentByEnqueue} insert(s), ${counter.texts.filter((t) => /^\s*begin\b/i.test(t)).length} BEGIN`).toBe("1 insert(s), 0 BEGIN");
      expect(jobs.map((j) => (j.payload as { i: number }).i)).toEqual(Array.from({ length: 2000 }, (_, i) => i));
      const ids = jobs.map((j) => j.id);
      expect([...ids].sort((a, b) => a - b)).toEqual(ids);
      for (const i of [0, 1, 7, 11, 13, 1001, 1999]) {
        const { created: isNew, ...job } = jobs[i]!;
        expect(isNew).toBe(true);
        expect(await docket.get(job.id)).toEqual(job);
      }
    } finally {
      await adapter.close();
    }
  });

  it("in the caller's transaction, 2,000 unkeyed jobs are stored in it, and its rollback leaves none of them", async () => {
    const pool = new pg.Pool({ connectionString: url!, max: 2 });
    const counter = new RecordingCounter();
    const adapter = postgresAdapter({ pool, tablePrefix: "b2_", instrument: { wrapDialect: (d) => counter.wrap(d) } });
    const client = await pool.connect();
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      await client.query("BEGIN");
      const jobs = await docket.enqueueMany(
        Array.from({ length: 2000 }, (_, i) => ({ task: "t", payload: i })),
        { transaction: client },
      );
      expect(jobs).toHaveLength(2000);
      const { rows } = await client.query("select count(*)::int as n from b2_jobs");
      expect(rows[0].n).toBe(2000);
      await client.query("ROLLBACK");
      expect((await pool.query("select count(*)::int as n from b2_jobs")).rows[0].n).toBe(0);
    } finally {
      client.release();
      await adapter.close();
      await pool.end();
    }
  });
});

describe("arrayRuns", () => {
  const job = (payload: string): NewJob => ({ task: "t", queue: "q", payload, state: "ready", priority: 0, runAt: 0, maxAttempts: 1, backoff: null });
  it("keeps a batch in one run up to the size limit, splits past it in order, and gives a larger job a run of its own", () => {
    const jobs = ["aaaa", "bbbb", "cccc", "d".repeat(30), "ee"].map(job);
    expect(arrayRuns(jobs).map((r) => r.length)).toEqual([5]);
    expect(arrayRuns(jobs, 20).map((r) => r.map((j) => j.payload[0]).join(""))).toEqual(["abc", "d", "e"]);
  });
});
