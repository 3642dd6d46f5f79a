/**
 * The walk of a keyed job through docket's source: which files its
 * functions live in, and how many calls each file takes per job. Runs N
 * keyed jobs (limit 1, one key per job) end to end on PostgreSQL — enqueue,
 * claim, handler, outcome with the key's promotion — in a child process
 * under V8's precise coverage, once with N jobs and once with none, and
 * reports the difference divided by N: calls per job by file of src/.
 *
 *   npx tsx bench/job-walk.ts [--jobs 200]
 *
 * Not a timing. Runs on any tree that has src/index.ts and
 * src/adapters/postgres/index.ts, so a commit before a restructuring can be
 * walked the same way (copy this file there).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { PG_URL, pgAdmin, withDatabase } from "./databases.ts";

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));

async function child(jobs: number, url: string): Promise<void> {
  const { Docket } = await import(join(ROOT, "src/index.ts"));
  const { postgresAdapter } = await import(join(ROOT, "src/adapters/postgres/index.ts"));
  const docket = new Docket({ adapter: postgresAdapter({ connectionString: url }) });
  await docket.migrate();
  let done = 0;
  let finish!: () => void;
  const all = new Promise<void>((r) => (finish = r));
  const worker = docket.worker({ concurrency: 10, pollMs: 50, logger: null, handlers: { walk: async () => undefined }, onEvent: (e: { type: string }) => e.type === "succeeded" && ++done === jobs && finish() });
  await worker.start();
  for (let i = 0; i < jobs; i++) await docket.enqueue("walk", { i }, { concurrency: { key: `k${i}`, limit: 1 } });
  if (jobs > 0) await all;
  await worker.stop();
  await docket.close();
}

/** Calls per file of src/ in one run of `jobs` jobs. */
function callsByFile(jobs: number, url: string): Map<string, number> {
  const dir = mkdtempSync(join(tmpdir(), "docket-walk-"));
  try {
    const r = spawnSync(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "--child", String(jobs), url], {
      env: { ...process.env, NODE_V8_COVERAGE: dir },
      stdio: "inherit",
    });
    if (r.status !== 0) throw new Error(`walk child exited ${r.status}`);
    const calls = new Map<string, number>();
    for (const file of readdirSync(dir)) {
      const report = JSON.parse(readFileSync(join(dir, file), "utf8")) as { result: { url: string; functions: { functionName: string; ranges: { count: number }[] }[] }[] };
      for (const script of report.result) {
        if (!script.url.startsWith("file://")) continue;
        const path = relative(ROOT, fileURLToPath(script.url));
        if (!path.startsWith("src/")) continue;
        for (const fn of script.functions) {
          if (fn.functionName === "") continue; // a module's top level runs once, at import
          calls.set(path, (calls.get(path) ?? 0) + (fn.ranges[0]?.count ?? 0));
        }
      }
    }
    return calls;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === "--child") {
  await child(Number(process.argv[3]), process.argv[4]!);
} else {
  const i = process.argv.indexOf("--jobs");
  const jobs = i > 0 ? Number(process.argv[i + 1]) : 200;
  const database = `docket_walk_${process.pid}`;
  await pgAdmin(`CREATE DATABASE ${database}`);
  try {
    const url = withDatabase(PG_URL, database);
    const idle = callsByFile(0, url);
    await pgAdmin(`DROP DATABASE ${database} WITH (FORCE)`);
    await pgAdmin(`CREATE DATABASE ${database}`);
    const busy = callsByFile(jobs, url);
    const rows = [...busy.entries()]
      .map(([file, n]) => [file, (n - (idle.get(file) ?? 0)) / jobs] as const)
      .filter(([, perJob]) => perJob >= 0.5)
      .sort((a, b) => b[1] - a[1]);
    const total = rows.reduce((sum, [, n]) => sum + n, 0);
    console.log(`| file | calls per keyed job |\n|---|---|`);
    for (const [file, n] of rows) console.log(`| ${file} | ${n.toFixed(1)} |`);
    console.log(`\n${rows.length} files, ${total.toFixed(0)} calls per job (${jobs} keyed jobs on PostgreSQL, minus an idle run)`);
  } finally {
    await pgAdmin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  }
}
