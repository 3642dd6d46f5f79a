/**
 * The dashboard's job browser at scale: how long each list page takes to
 * serve (the dashboard handler's whole response: the list, the counts it
 * links, the HTML) with --big (default 1,000,000) jobs in a PostgreSQL
 * store, against the same pages with 10,000 jobs of the same mix measured in
 * the same run (test/support/list-fill.ts: 90% succeeded, 6% dead, 3% ready,
 * 1% scheduled, 20 queues, 50 tasks, a rare queue and task). Median of
 * --reads reads after one to warm up. The plans behind these figures are
 * checked by test/list-plans.test.ts.
 *
 *   npx tsx bench/list-pages.ts [--big 1000000] [--reads 7]
 */
import { Docket } from "../src/index.ts";
import { openDatabase } from "./databases.ts";
import { listFill } from "../test/support/list-fill.ts";

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!);
const BIG = Number(args.get("big") ?? 1_000_000);
const READS = Number(args.get("reads") ?? 7);
const SMALL = 10_000;

const PAGES: [string, string][] = [
  ["overview", "/"],
  ["all jobs", "/jobs"],
  ["ready", "/jobs?state=ready"],
  ["scheduled", "/jobs?state=scheduled"],
  ["succeeded", "/jobs?state=succeeded"],
  ["dead", "/jobs?state=dead"],
  ["waiting", "/jobs?state=waiting"],
  ["cancelled", "/jobs?state=cancelled"],
  ["ready in q3", "/jobs?state=ready&queue=q3"],
  ["ready in q15 (none)", "/jobs?state=ready&queue=q15"],
  ["succeeded in q7", "/jobs?state=succeeded&queue=q7"],
  ["succeeded in qrare (10)", "/jobs?state=succeeded&queue=qrare"],
  ["dead in q7 of t7", "/jobs?state=dead&queue=q7&task=t7"],
  ["ready of t3", "/jobs?state=ready&task=t3"],
  ["succeeded of trare (10)", "/jobs?state=succeeded&task=trare"],
  ["key account-42", "/jobs?key=account-42"],
  ["queue q7, any state", "/jobs?queue=q7"],
  ["queue qrare, any state", "/jobs?queue=qrare"],
  ["error search '#77777'", "/jobs?state=dead&errorContains=%2377777"],
  ["dead letters", "/dead"],
];

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const db = await openDatabase("postgres");
const times = new Map<string, number[]>();
try {
  for (const [scenario, rows] of [[1, SMALL], [2, BIG]] as const) {
    const spec = db.spec(scenario);
    const adapter = await db.open(scenario);
    const docket = new Docket({ adapter });
    await docket.migrate();
    const pg = (await import("pg")).default;
    const c = new pg.Client({ connectionString: spec.location });
    await c.connect();
    const t0 = Date.now();
    for (const statement of listFill(rows)) await c.query(statement.replaceAll("{jobs}", `${spec.prefix}jobs`));
    await c.query(`VACUUM (ANALYZE) ${spec.prefix}jobs`);
    await c.query("CHECKPOINT").catch(() => undefined);
    await c.end();
    console.error(`${rows.toLocaleString("en")} jobs filled in ${Date.now() - t0} ms`);
    const handler = docket.dashboard();
    for (const [name, path] of PAGES) {
      const get = async () => {
        const r = await handler(new Request(`http://127.0.0.1${path}`));
        if (r.status !== 200) throw new Error(`${path}: HTTP ${r.status}`);
        await r.text();
      };
      await get();
      const ms: number[] = [];
      for (let i = 0; i < READS; i++) {
        const t = performance.now();
        await get();
        ms.push(performance.now() - t);
      }
      times.set(`${rows}:${name}`, ms);
    }
    await docket.close();
  }
} finally {
  await db.dispose();
}
console.log(`PostgreSQL, dashboard pages served (handler to last byte), median of ${READS}:`);
console.log(`| page | ${SMALL.toLocaleString("en")} jobs, ms | ${BIG.toLocaleString("en")} jobs, ms | ratio |`);
console.log("|---|---|---|---|");
for (const [name, path] of PAGES) {
  const small = median(times.get(`${SMALL}:${name}`)!);
  const big = median(times.get(`${BIG}:${name}`)!);
  console.log(`| ${name} (\`${path}\`) | ${small.toFixed(1)} | ${big.toFixed(1)} | ${(big / small).toFixed(2)}× |`);
}
process.exit(0);
