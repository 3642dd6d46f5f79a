/**
 * Scale benchmark: does a worker slow down, or grow, with the size of the
 * jobs table? Per adapter, one worker process (concurrency 10, defaults)
 * drains 20,000 measured jobs (priority 0) from a table that also holds
 *  - "waiting 1k" / "waiting 1M": 1,000 or 1,000,000 ready jobs behind them (priority 1);
 *  - "finished 1M": 1,000,000 succeeded jobs (not yet due for retention).
 * Reports the drain rate of the measured jobs and the worker's peak RSS
 * while it drained them,
 * each as a ratio to "waiting 1k" measured in the same run.
 *
 *   npx tsx bench/scale.ts [--systems sqlite,postgres,mysql] [--runs 1] [--big 1000000]
 */
import { fileURLToPath } from "node:url";
import { Docket } from "../src/index.ts";
import { ADAPTERS, openDatabase, type AdapterName } from "./databases.ts";
import { fill } from "./fill.ts";
import { startChild, wallNow } from "./children.ts";

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!);
const systems = (args.get("systems")?.split(",") ?? ADAPTERS) as AdapterName[];
const runs = Number(args.get("runs") ?? 1);
const BIG = Number(args.get("big") ?? 1_000_000);
const MEASURED = 20_000;
const CHILD = fileURLToPath(new URL("./drain-child.ts", import.meta.url));
const CASES = [
  { name: "waiting 1k", filler: 1_000, state: "ready" },
  { name: `waiting ${BIG / 1e6}M`, filler: BIG, state: "ready" },
  { name: `finished ${BIG / 1e6}M`, filler: BIG, state: "succeeded" },
] as const;

const rows: { system: string; case: string; run: number; jobsPerSec: number; maxRssMb: number }[] = [];
let n = 0;
for (const system of systems) {
  const db = await openDatabase(system);
  try {
    for (let run = 1; run <= runs; run++) {
      for (const c of CASES) {
        const scenario = ++n;
        const store = await db.open(scenario);
        const docket = new Docket({ adapter: store });
        await docket.migrate();
        const now = Date.now();
        await fill(db.spec(scenario), c.filler, c.state, now - 1000);
        for (let i = 0; i < MEASURED; i += 1000) {
          await docket.enqueueMany(Array.from({ length: 1000 }, (_, k) => ({ task: "noop", payload: { i: i + k } })));
        }
        await store.close();
        const child = startChild([CHILD, JSON.stringify(db.spec(scenario)), "10", "{}", JSON.stringify({ priority: 0 })]);
        await child.next((m) => m.ready === true);
        // The drain ends when the child's last measured job finished (not when its report arrived); the peak
        // RSS is the one reported with it, before the stop (which, with a million jobs still waiting, hands back a full buffer).
        let resolve!: (end: { at: number; rssMb: number }) => void;
        const drained = new Promise<{ at: number; rssMb: number }>((r) => (resolve = r));
        child.onProgress((k, at, rssMb) => k >= MEASURED && resolve({ at, rssMb }));
        const t0 = wallNow();
        child.send({ go: true });
        const end = await drained;
        const seconds = (end.at - t0) / 1000;
        child.send({ stop: true });
        await child.next((m) => m.done === true);
        rows.push({ system, case: c.name, run, jobsPerSec: MEASURED / seconds, maxRssMb: end.rssMb });
        console.error(`${system} ${c.name} run ${run}: ${(MEASURED / seconds).toFixed(0)} jobs/s, max RSS ${end.rssMb.toFixed(0)} MB`);
      }
    }
  } finally {
    await db.dispose();
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`| system | table | drain jobs/s (median of ${runs}) | × waiting 1k | worker max RSS MB | × waiting 1k |`);
console.log("|---|---|---|---|---|---|");
for (const system of systems) {
  const of = (name: string) => rows.filter((r) => r.system === system && r.case === name);
  const base = of(CASES[0].name);
  for (const c of CASES) {
    const rs = of(c.name);
    const rate = median(rs.map((r) => r.jobsPerSec));
    const rss = median(rs.map((r) => r.maxRssMb));
    console.log(
      `| ${system} | ${c.name} | ${rate.toFixed(0)} | ${(rate / median(base.map((r) => r.jobsPerSec))).toFixed(2)}× | ${rss.toFixed(0)} | ${(rss / median(base.map((r) => r.maxRssMb))).toFixed(2)}× |`,
    );
  }
}
if (args.get("json")) (await import("node:fs")).writeFileSync(args.get("json")!, JSON.stringify(rows, null, 2));
process.exit(0);
