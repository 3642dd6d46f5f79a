/**
 * The README's demo: a few hundred jobs on the embedded SQLite default.
 * The same file runs under Deno (`npm run demo:deno`), where the SQLite
 * adapter opens the file with the built-in node:sqlite.
 * Run with `npm run demo`. It creates ./demo.db (deleted first), enqueues
 * jobs, runs two workers until every job is finished and prints a summary.
 */
import { rmSync } from "node:fs";
import { Docket } from "../src/index.ts";
import { sqliteAdapter } from "../src/adapters/sqlite/index.ts";

type Tasks = {
  "email.send": { to: string };
  "report.build": { id: number; flaky: boolean };
};

const FILE = "demo.db";
for (const suffix of ["", "-wal", "-shm"]) rmSync(FILE + suffix, { force: true });

const docket = new Docket<Tasks>({
  adapter: sqliteAdapter({ filename: FILE }),
  tasks: { "email.send": { queue: "mail" }, "report.build": { maxAttempts: 3, backoff: { baseMs: 20, jitter: 0.5 } } },
});
await docket.migrate();

const emails = Array.from({ length: 200 }, (_, i) => ({ task: "email.send" as const, payload: { to: `user${i}@example.com` } }));
const reports = Array.from({ length: 100 }, (_, i) => ({
  task: "report.build" as const,
  payload: { id: i, flaky: i % 10 === 0 },
  options: { priority: i % 3, delay: i % 7 === 0 ? 150 : 0 },
}));
await docket.enqueueMany(emails);
await docket.enqueueMany(reports);
console.log(`enqueued ${emails.length} emails (queue "mail") and ${reports.length} reports (queue "default", some delayed, every 10th flaky)`);

const failedOnce = new Set<number>();
let retries = 0;
const handlers = {
  "email.send": async () => {
    await new Promise((r) => setTimeout(r, 2));
  },
  "report.build": async ({ id, flaky }: Tasks["report.build"]) => {
    await new Promise((r) => setTimeout(r, 5));
    if (flaky && !failedOnce.has(id)) {
      failedOnce.add(id);
      throw new Error(`report ${id}: transient failure`);
    }
  },
};
const onEvent = (e: { type: string }) => void (e.type === "retry" && retries++);
const started = Date.now();
const workers = [
  docket.worker({ handlers, queues: ["mail", "default"], concurrency: 8, pollMs: 20, onEvent }),
  docket.worker({ handlers: { "report.build": handlers["report.build"] }, queues: ["default"], concurrency: 4, pollMs: 20, onEvent }),
];
await Promise.all(workers.map((w) => w.start()));

const total = emails.length + reports.length;
for (;;) {
  await new Promise((r) => setTimeout(r, 200));
  const done = (await docket.list({ state: "succeeded", limit: 10_000 })).length;
  console.log(`progress: ${done}/${total} succeeded, ${retries} retries so far`);
  if (done === total) break;
  if (Date.now() - started > 60_000) {
    console.error("demo did not finish within 60 s");
    process.exitCode = 1;
    break;
  }
}
await Promise.all(workers.map((w) => w.stop()));

const byState = new Map<string, number>();
for (const job of await docket.list({ limit: 10_000 })) byState.set(job.state, (byState.get(job.state) ?? 0) + 1);
const seconds = (Date.now() - started) / 1000;
console.log(`\nsummary: ${total} jobs in ${seconds.toFixed(2)} s (${Math.round(total / seconds)} jobs/s), ${retries} retried attempts`);
console.log(`by state: ${[...byState].map(([s, n]) => `${s}=${n}`).join(", ")}`);
await docket.close();
