/**
 * Drain benchmark: N no-op jobs are enqueued, then P worker processes of
 * concurrency C (bench/drain-child.ts) drain them; jobs/s is N over the time
 * from "go" to the last success. Also reports statements and commits per
 * job as the workers' adapters counted them, and the enqueue rate.
 *
 *   npx tsx bench/drain.ts [--adapters sqlite,postgres,mysql] [--jobs 20000]
 *     [--scenarios c10x1,c50x1,c10x4] [--runs 3] [--json out.json] [--worker '{"prefetch":0}']
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Docket } from "../src/index.ts";
import { ADAPTERS, openDatabase, type AdapterName, type Database } from "./databases.ts";

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!);
const adapters = (args.get("adapters")?.split(",") ?? ADAPTERS) as AdapterName[];
const jobs = Number(args.get("jobs") ?? 20000);
const runs = Number(args.get("runs") ?? 1);
const scenarios = (args.get("scenarios") ?? "c10x1,c50x1,c10x4").split(",").map((s) => {
  const m = /^c(\d+)x(\d+)$/.exec(s);
  if (!m) throw new Error(`bad scenario ${s}`);
  return { name: s, concurrency: Number(m[1]), processes: Number(m[2]) };
});
const workerExtra = args.get("worker") ?? "{}";
const CHILD = fileURLToPath(new URL("./drain-child.ts", import.meta.url));

export interface DrainResult {
  adapter: AdapterName;
  scenario: string;
  run: number;
  jobsPerSec: number;
  enqueuePerSec: number;
  statementsPerJob: number;
  commitsPerJob: number;
}

interface Child {
  send(m: object): void;
  next(pred: (m: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  onProgress(fn: (n: number) => void): void;
}

function startChild(spec: object, concurrency: number): Child {
  const p = spawn(process.execPath, ["--import", "tsx", CHILD, JSON.stringify(spec), String(concurrency), workerExtra], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const waiters: { pred: (m: Record<string, unknown>) => boolean; resolve: (m: Record<string, unknown>) => void }[] = [];
  let progress = (_n: number) => undefined as void;
  createInterface({ input: p.stdout! }).on("line", (line) => {
    let m: Record<string, unknown>;
    try {
      m = JSON.parse(line);
    } catch {
      process.stderr.write(`child: ${line}\n`);
      return;
    }
    if (m.progress) progress(Number(m.n));
    const i = waiters.findIndex((w) => w.pred(m));
    if (i >= 0) waiters.splice(i, 1)[0]!.resolve(m);
  });
  p.on("exit", (code) => {
    if (code !== 0) console.error(`drain child exited with ${code}`);
  });
  return {
    send: (m) => p.stdin!.write(JSON.stringify(m) + "\n"),
    next: (pred) => new Promise((resolve) => waiters.push({ pred, resolve })),
    onProgress: (fn) => (progress = fn),
  };
}

async function drainOnce(db: Database, n: number, adapter: AdapterName, s: (typeof scenarios)[number], run: number): Promise<DrainResult> {
  const store = await db.open(n);
  const docket = new Docket({ adapter: store });
  await docket.migrate();
  const t0 = performance.now();
  for (let i = 0; i < jobs; i += 1000) {
    const batch = Array.from({ length: Math.min(1000, jobs - i) }, (_, k) => ({ task: "noop", payload: { i: i + k } }));
    await docket.enqueueMany(batch);
  }
  const enqueuePerSec = jobs / ((performance.now() - t0) / 1000);
  const children = Array.from({ length: s.processes }, () => startChild(db.spec(n), s.concurrency));
  await Promise.all(children.map((c) => c.next((m) => m.ready === true)));
  const counts = children.map(() => 0);
  let resolveAll!: () => void;
  const all = new Promise<void>((r) => (resolveAll = r));
  children.forEach((c, i) =>
    c.onProgress((k) => {
      counts[i] = k;
      if (counts.reduce((a, b) => a + b, 0) >= jobs) resolveAll();
    }),
  );
  const start = performance.now();
  for (const c of children) c.send({ go: true });
  await all;
  const elapsed = (performance.now() - start) / 1000;
  for (const c of children) c.send({ stop: true });
  const done = await Promise.all(children.map((c) => c.next((m) => m.done === true)));
  const statements = done.reduce((a, m) => a + Number(m.statements), 0);
  const commits = done.reduce((a, m) => a + Number(m.commits), 0);
  const left = await store.list({ state: "ready", limit: 1 });
  if (left.length > 0) throw new Error("jobs left after drain");
  await store.close();
  return { adapter, scenario: s.name, run, jobsPerSec: jobs / elapsed, enqueuePerSec, statementsPerJob: statements / jobs, commitsPerJob: commits / jobs };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const results: DrainResult[] = [];
let scenarioNo = 0;
for (const adapter of adapters) {
  const db = await openDatabase(adapter);
  try {
    for (let run = 1; run <= runs; run++) {
      for (const s of scenarios) {
        const r = await drainOnce(db, ++scenarioNo, adapter, s, run);
        results.push(r);
        console.error(`${adapter} ${s.name} run ${run}: ${r.jobsPerSec.toFixed(0)} jobs/s, ${r.statementsPerJob.toFixed(2)} statements/job`);
      }
    }
  } finally {
    await db.dispose();
  }
}
console.log("| adapter | scenario | jobs/s (median) | spread | statements/job | commits/job | enqueue batch jobs/s |");
console.log("|---|---|---|---|---|---|---|");
for (const adapter of adapters) {
  for (const s of scenarios) {
    const rs = results.filter((r) => r.adapter === adapter && r.scenario === s.name);
    const rate = rs.map((r) => r.jobsPerSec);
    console.log(
      `| ${adapter} | ${s.name} | ${median(rate).toFixed(0)} | ${Math.min(...rate).toFixed(0)}–${Math.max(...rate).toFixed(0)} | ${median(rs.map((r) => r.statementsPerJob)).toFixed(2)} | ${median(rs.map((r) => r.commitsPerJob)).toFixed(2)} | ${median(rs.map((r) => r.enqueuePerSec)).toFixed(0)} |`,
    );
  }
}
if (args.get("json")) {
  const { writeFileSync } = await import("node:fs");
  writeFileSync(args.get("json")!, JSON.stringify(results, null, 2));
}
process.exit(0);
