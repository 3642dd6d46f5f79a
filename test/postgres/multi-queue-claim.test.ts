import { afterAll, describe, expect, it } from "vitest";
import { Docket } from "../../src/index.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../support/targets.ts";
import { inlined, recordingPostgresAdapter } from "../support/sent-statements.ts";

/**
 * A claim of several queues reads each queue's first jobs in index order,
 * not every ready job of those queues: with 2,000 ready jobs in each of two
 * queues, the claim's statement reads at most its limit of rows per queue
 * (EXPLAIN ANALYZE, rolled back). Read across the queues in claim order,
 * PostgreSQL scanned all 4,000 and sorted them, per claim.
 */
const pg = (await import("pg")).default;
const created = await createPgTestDatabase("docket_multi_queue", "the postgres multi-queue claim tests");
const url = created?.url ?? null;
afterAll(async () => {
  if (created) await dropPgDatabase(PG_URL, created.database);
});

const PER_QUEUE = 2_000;
const LIMIT = 10;

/** The rows every scan of `table` in `plan` (EXPLAIN ANALYZE text) returned, loops counted, but reads by primary key. */
function rowsScanned(plan: string, table: string): number {
  let rows = 0;
  for (const line of plan.split("\n")) {
    if (!new RegExp(`Scan .*on ${table}\\b`).test(line) || line.includes(`${table}_pkey`)) continue;
    const m = /actual time=[\d.]+\.\.[\d.]+ rows=(\d+) loops=(\d+)/.exec(line);
    if (m) rows += Number(m[1]) * Number(m[2]);
  }
  return rows;
}

describe.skipIf(!url)("postgres: a claim of several queues", () => {
  for (const [name, capped] of [
    ["the one-statement claim", false],
    ["the controls transaction's candidate read (a third queue has a cap)", true],
  ] as const) {
    it(`${name} reads each queue's first jobs, not every ready job of the queues`, async () => {
      const prefix = capped ? "mqc_" : "mqs_";
      const { adapter, sent } = recordingPostgresAdapter(url!, prefix);
      const admin = new pg.Client({ connectionString: url! });
      await admin.connect();
      try {
        const docket = new Docket({ adapter });
        await docket.migrate();
        for (const queue of ["a", "b"]) await docket.enqueueMany(Array.from({ length: PER_QUEUE }, () => ({ task: "t", payload: {}, options: { queue } })));
        // A cap on a third queue of the claim: the controls transaction claims, and reads the uncapped queues together.
        if (capped) await docket.setQueueCap("c", 1_000);
        await admin.query(`ANALYZE ${prefix}jobs`);
        const now = Date.now();
        sent.length = 0;
        const claimed = await adapter.claim({ queues: capped ? ["a", "b", "c"] : ["a", "b"], limit: LIMIT, now, leaseToken: "tok", leaseExpiresAt: now + 30_000, stage: false });
        expect(claimed).toHaveLength(LIMIT);
        // The one-statement claim, or (a cap applies) the controls transaction's read of candidates.
        const read = sent.find((t) => /for update skip locked/i.test(t.text) && (!capped || t.text.includes("docket:claim-candidates")));
        expect(read, sent.map((t) => t.text.slice(0, 120)).join("\n")).toBeDefined();
        await admin.query("BEGIN");
        const plan = (await admin.query(`EXPLAIN ANALYZE ${inlined(read!)}`)).rows.map((r) => r["QUERY PLAN"] as string).join("\n");
        await admin.query("ROLLBACK");
        expect(rowsScanned(plan, `${prefix}jobs`), plan).toBeLessThanOrEqual(2 * LIMIT);
      } finally {
        await admin.end();
        await adapter.close();
      }
    });
  }
});
