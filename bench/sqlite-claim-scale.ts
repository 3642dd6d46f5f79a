/**
 * Benchmark (not a test): time of one SQLite claim (limit 10) as the jobs
 * table grows, with `--finished` finished jobs and `--waiting` ready ones.
 *
 *   npx tsx bench/sqlite-claim-scale.ts [--waiting 100000] [--finished 100000] [--claims 50]
 *
 * Reports the median and p90 of `--claims` claims, each taking 10 jobs.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import Database from "better-sqlite3";
import { sqliteAdapter } from "../src/adapters/sqlite/index.ts";

const { values: args } = parseArgs({
  options: { waiting: { type: "string", default: "100000" }, finished: { type: "string", default: "100000" }, claims: { type: "string", default: "50" } },
});
const dir = mkdtempSync(join(tmpdir(), "docket-claim-scale-"));
const file = join(dir, "jobs.db");
const adapter = sqliteAdapter({ filename: file, synchronous: "normal" });
try {
  await adapter.migrate();
  const now = Date.UTC(2030, 0, 1);
  const total = Number(args.waiting) + Number(args.finished);
  for (let i = 0; i < total; i += 5000) {
    const n = Math.min(5000, total - i);
    const jobs = Array.from({ length: n }, () => ({ task: "t", queue: "q", payload: "{}", state: "ready" as const, priority: 0, runAt: now, maxAttempts: 1, backoff: null }));
    await adapter.enqueue({ jobs, now });
  }
  const raw = new Database(file);
  raw.prepare(`UPDATE docket_jobs SET state = 'succeeded', finished_at = ? WHERE id <= ?`).run(now, Number(args.finished));
  raw.close();
  const times: number[] = [];
  for (let i = 0; i < Number(args.claims); i++) {
    const t0 = performance.now();
    await adapter.claim({ queues: ["q"], limit: 10, now, leaseToken: `t${i}`, leaseExpiresAt: now + 60_000 });
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!.toFixed(2);
  console.log(`sqlite claim (limit 10), ${args.waiting} waiting + ${args.finished} finished: p50 ${at(0.5)} ms, p90 ${at(0.9)} ms`);
} finally {
  await adapter.close();
  rmSync(dir, { recursive: true, force: true });
}
