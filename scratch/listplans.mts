import pg from "pg";
const c = new pg.Client({ connectionString: "postgres://postgres@127.0.0.1:5432/postgres" });
await c.connect();
await c.query("DROP DATABASE IF EXISTS docket_listplans");
await c.query("CREATE DATABASE docket_listplans");
await c.end();
const { postgresAdapter } = await import("../src/adapters/postgres/index.ts");
const a = postgresAdapter({ connectionString: "postgres://postgres@127.0.0.1:5432/docket_listplans" });
await a.migrate();
await a.close();
const d = new pg.Client({ connectionString: "postgres://postgres@127.0.0.1:5432/docket_listplans" });
await d.connect();
const t0 = Date.now();
// 1,000,000 jobs: 900k succeeded, 60k dead, 30k ready, 10k scheduled; 20 queues, 50 tasks.
await d.query(`INSERT INTO docket_jobs (task, queue, payload, state, priority, run_at, attempt, max_attempts, created_at, updated_at, finished_at, last_error)
  SELECT 't' || (g % 50), 'q' || (g % 20), '{}',
    CASE WHEN g % 100 < 90 THEN 'succeeded' WHEN g % 100 < 96 THEN 'dead' WHEN g % 100 < 99 THEN 'ready' ELSE 'scheduled' END,
    0, 1700000000000 + g, CASE WHEN g % 100 < 90 THEN 1 ELSE 0 END, 3, 1700000000000 + g, 1700000000000 + g,
    CASE WHEN g % 100 < 96 THEN 1700000000000 + g END,
    CASE WHEN g % 100 BETWEEN 90 AND 95 THEN 'Error: card declined ' || g END
  FROM generate_series(1, 1000000) g`);
await d.query("ANALYZE docket_jobs");
console.log(`filled in ${Date.now() - t0} ms`);
const cases: [string, string, unknown[]][] = [
  ["all, first page", "SELECT * FROM docket_jobs ORDER BY id LIMIT 100", []],
  ["state=ready", "SELECT * FROM docket_jobs WHERE state = $1 ORDER BY id LIMIT 100", ["ready"]],
  ["state=ready queue=q7", "SELECT * FROM docket_jobs WHERE state = $1 AND queue = $2 ORDER BY id LIMIT 100", ["ready", "q7"]],
  ["state=dead queue=q7 task=t7", "SELECT * FROM docket_jobs WHERE state = $1 AND queue = $2 AND task = $3 ORDER BY id LIMIT 100", ["dead", "q7", "t7"]],
  ["state=scheduled after 990000", "SELECT * FROM docket_jobs WHERE state = $1 AND id > $2 ORDER BY id LIMIT 100", ["scheduled", 990000]],
  ["queue=q7 (any state)", "SELECT * FROM docket_jobs WHERE queue = $1 ORDER BY id LIMIT 100", ["q7"]],
  ["task=t7 state=scheduled", "SELECT * FROM docket_jobs WHERE task = $1 AND state = $2 ORDER BY id LIMIT 100", ["t7", "scheduled"]],
];
for (const [name, sql, params] of cases) {
  const times: number[] = [];
  let plan = "";
  for (let i = 0; i < 3; i++) {
    const r = await d.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params);
    const p = r.rows[0]["QUERY PLAN"][0];
    times.push(p["Execution Time"]);
    const walk = (n: any): string => `${n["Node Type"]}${n["Index Name"] ? `(${n["Index Name"]})` : ""}${n.Plans ? `[${n.Plans.map(walk).join(",")}]` : ""}`;
    plan = walk(p.Plan);
  }
  times.sort((a, b) => a - b);
  console.log(`${name.padEnd(32)} median ${times[1]!.toFixed(1)} ms  ${plan}`);
}
await d.end();
