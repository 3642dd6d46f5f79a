import { CompiledQuery } from "kysely";
import { describe, expect, it } from "vitest";
import { Docket } from "../src/client/docket.ts";
import type { ListOptions } from "../src/client/reads.ts";
import { tapDialect } from "../src/testing/kysely/tapped-driver.ts";
import { openTarget } from "./support/targets.ts";
import { listFill } from "./support/list-fill.ts";

const ROWS = 1_000_000;
const PAGE = 100;

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Rows Removed by Filter"?: number;
  "Actual Rows"?: number;
  Plans?: PlanNode[];
}

/**
 * A primary-key walk may drop at most a fifth of the table to fill its page
 * (a filter that matches 1 row in 2,000 or more; about 30 ms here); the walks
 * that made a list slow dropped the whole table, for a pair that matched
 * nothing.
 */
const WALK_DROPS_MAX = ROWS / 5;

/** The plan's scans of the jobs table, in words, and whether any reads the table whole or walks its primary key past WALK_DROPS_MAX rows it drops. */
function scansOf(plan: PlanNode, jobs: string): { words: string; unbounded: string | null } {
  const words: string[] = [];
  let unbounded: string | null = null;
  const walk = (node: PlanNode) => {
    if (node["Relation Name"] === jobs || node["Index Name"]?.startsWith(jobs)) {
      words.push(`${node["Node Type"]}${node["Index Name"] ? ` ${node["Index Name"]}` : ""}`);
      if (node["Node Type"].includes("Seq Scan")) unbounded = `${node["Node Type"]} of ${jobs}`;
      if (node["Index Name"] === `${jobs}_pkey` && (node["Rows Removed by Filter"] ?? 0) > WALK_DROPS_MAX) unbounded = `primary key walked past ${node["Rows Removed by Filter"]} rows it dropped`;
    }
    for (const child of node.Plans ?? []) walk(child);
  };
  walk(plan);
  return { words: words.join(" + "), unbounded };
}

/**
 * The job browser's lists (`list()`, as the dashboard pages through them:
 * 100 a page, keyset by id) read an index range bounded by the jobs they
 * show or the jobs of their state and filter, never the whole table, at
 * 1,000,000 rows on PostgreSQL: each statement docket sent is shown by
 * PostgreSQL's own EXPLAIN (ANALYZE) — including combinations that match
 * few or no rows (a queue without ready jobs, a rare queue's succeeded
 * ones), the cases a primary-key walk turns into a scan of the table. The
 * bulk confirmation's count of a state and queue is checked the same way.
 * Times are in `bench/list-pages.ts`, not here.
 */
describe("postgres: job list query plans at 1,000,000 rows", () => {
  it("every list page of a state (with any queue, task or key, a next page, or an error search) reads an index range, not the table", async (ctx) => {
    const target = await openTarget("postgres");
    if (!target) return ctx.skip();
    const store = await target.open();
    const sent: { sql: string; parameters: readonly unknown[] }[] = [];
    const adapter = await store.connect({ instrument: { wrapDialect: (d) => tapDialect(d, { query: (s, parameters) => void sent.push({ sql: s, parameters }) }) } });
    const app = await store.application!();
    try {
      await adapter.migrate();
      const docket = new Docket({ adapter });
      for (const statement of listFill(ROWS)) await store.execute(statement);
      await store.execute("VACUUM (ANALYZE) {jobs}");
      const jobs = `${store.tablePrefix}jobs`;
      const lists: [string, ListOptions][] = [
        ["all", {}],
        ...(["waiting", "scheduled", "ready", "blocked", "running", "succeeded", "dead", "cancelled"] as const).map((state): [string, ListOptions] => [`state=${state}`, { state }]),
        ["ready in q3", { state: "ready", queue: "q3" }],
        ["ready in q15 (none)", { state: "ready", queue: "q15" }],
        ["succeeded in q7", { state: "succeeded", queue: "q7" }],
        ["succeeded in qrare (10)", { state: "succeeded", queue: "qrare" }],
        ["dead in q7 of t7", { state: "dead", queue: "q7", task: "t7" }],
        ["succeeded of trare (10)", { state: "succeeded", task: "trare" }],
        ["ready of t3", { state: "ready", task: "t3" }],
        ["scheduled of t8", { state: "scheduled", task: "t8" }],
        ["key account-42", { concurrencyKey: "account-42" }],
        ["blocked under key account-42", { state: "blocked", concurrencyKey: "account-42" }],
        ["dead whose error contains '#77777'", { state: "dead", errorContains: "#77777" }],
        ["queue q7, any state", { queue: "q7" }],
      ];
      const report: string[] = [];
      const check = async (name: string, run: () => Promise<unknown>) => {
        sent.length = 0;
        await run();
        const reads = sent.filter((q) => /^\s*select/i.test(q.sql) && q.sql.includes(jobs));
        expect(reads, name).toHaveLength(1);
        const q = reads[0]!;
        const [row] = (await app.db.executeQuery(CompiledQuery.raw(`EXPLAIN (ANALYZE, FORMAT JSON) ${q.sql}`, [...q.parameters]))).rows as { "QUERY PLAN": { Plan: PlanNode; "Execution Time": number }[] }[];
        const { Plan, "Execution Time": ms } = row!["QUERY PLAN"][0]!;
        const scans = scansOf(Plan, jobs);
        report.push(`${name.padEnd(36)} ${scans.words} (${ms.toFixed(1)} ms)`);
        expect(scans.unbounded, `${name}: ${q.sql}\n${report.join("\n")}`).toBeNull();
      };
      for (const [name, options] of lists) {
        await check(name, () => docket.list({ ...options, limit: PAGE }));
        const first = await docket.list({ ...options, limit: PAGE });
        if (first.length === PAGE) await check(`${name}, next page`, () => docket.list({ ...options, afterId: first[PAGE - 1]!.id, limit: PAGE }));
      }
      await check("bulk count: dead in q7", () => docket.bulk.count({ state: "dead", queue: "q7" }));
      await check("bulk count: succeeded in qrare", () => docket.bulk.count({ state: "succeeded", queue: "qrare" }));
      console.log(`postgres: list() at ${ROWS.toLocaleString("en")} rows (EXPLAIN ANALYZE of the statement docket sent)\n  ${report.join("\n  ")}`);
    } finally {
      await app.close();
      await adapter.close();
      await store.close();
      await target.dispose();
    }
  }, 300_000);
});

