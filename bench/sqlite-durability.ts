/**
 * Benchmark (not a test): the cost of SQLite's synchronous = FULL (docket's
 * default) against NORMAL, for one-at-a-time enqueues, each its own commit.
 *
 *   npx tsx bench/sqlite-durability.ts [--jobs 2000] [--rounds 3]
 *
 * Each round runs both settings on fresh files, alternating which goes
 * first; the report is the median per setting and the ratio FULL / NORMAL.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { Docket } from "../src/client/docket.ts";
import { sqliteAdapter } from "../src/adapters/sqlite/index.ts";

const { values: args } = parseArgs({ options: { jobs: { type: "string", default: "2000" }, rounds: { type: "string", default: "3" } } });
const JOBS = Number(args.jobs);
const ROUNDS = Number(args.rounds);

async function timeEnqueues(synchronous: "full" | "normal"): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "docket-bench-sync-"));
  const docket = new Docket({ adapter: sqliteAdapter({ filename: join(dir, "jobs.db"), synchronous }) });
  try {
    await docket.migrate();
    const t0 = performance.now();
    for (let i = 0; i < JOBS; i++) await docket.enqueue("t", { i });
    return performance.now() - t0;
  } finally {
    await docket.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const times = { full: [] as number[], normal: [] as number[] };
for (let r = 0; r < ROUNDS; r++) {
  const order: ("full" | "normal")[] = r % 2 === 0 ? ["full", "normal"] : ["normal", "full"];
  for (const s of order) times[s].push(await timeEnqueues(s));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const full = median(times.full);
const normal = median(times.normal);
console.log(`sqlite enqueue, ${JOBS} jobs one at a time, median of ${ROUNDS}:`);
console.log(`  synchronous=FULL   ${full.toFixed(0)} ms (${Math.round((JOBS / full) * 1000)} jobs/s)`);
console.log(`  synchronous=NORMAL ${normal.toFixed(0)} ms (${Math.round((JOBS / normal) * 1000)} jobs/s)`);
console.log(`  ratio FULL / NORMAL: ${(full / normal).toFixed(2)}x`);
