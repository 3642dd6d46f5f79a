/**
 * Stats benchmark: does `docket.stats()` (the dashboard's and `docket
 * status`'s read) slow down with history? Per adapter, a table with 1,000
 * ready jobs and either 1,000 or --big (default 1,000,000) jobs that
 * succeeded two days ago (kept: retention is 7 days), half of them with a
 * concurrency key. Reports the median
 * time of --reads stats() calls and its ratio to the small table's.
 *
 *   npx tsx bench/stats-scale.ts [--systems sqlite,postgres,mysql] [--big 1000000] [--reads 7]
 */
import { Docket } from "../src/index.ts";
import { ADAPTERS, openDatabase, type AdapterName } from "./databases.ts";
import { fill } from "./fill.ts";

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!);
const systems = (args.get("systems")?.split(",") ?? ADAPTERS) as AdapterName[];
const BIG = Number(args.get("big") ?? 1_000_000);
const READS = Number(args.get("reads") ?? 7);
const DAY = 24 * 3600_000;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const results: { system: string; finished: number; ms: number }[] = [];
let n = 0;
for (const system of systems) {
  const db = await openDatabase(system);
  try {
    for (const finished of [1_000, BIG]) {
      const scenario = ++n;
      const store = await db.open(scenario);
      const docket = new Docket({ adapter: store });
      await docket.migrate();
      await fill(db.spec(scenario), finished / 2, "succeeded", Date.now() - 2 * DAY);
      await fill(db.spec(scenario), finished / 2, "succeeded", Date.now() - 2 * DAY, "account-1");
      await fill(db.spec(scenario), 1_000, "ready", Date.now() - 1000);
      await docket.stats();
      const times: number[] = [];
      for (let i = 0; i < READS; i++) {
        const t0 = performance.now();
        await docket.stats();
        times.push(performance.now() - t0);
      }
      await store.close();
      results.push({ system, finished, ms: median(times) });
      console.error(`${system} ${finished} finished: stats() ${median(times).toFixed(1)} ms (median of ${READS})`);
    }
  } finally {
    await db.dispose();
  }
}
console.log(`| system | finished jobs in the table | stats() ms (median of ${READS}) | × 1,000 finished |`);
console.log("|---|---|---|---|");
for (const system of systems) {
  const [small, big] = results.filter((r) => r.system === system);
  for (const r of [small!, big!]) console.log(`| ${system} | ${r.finished.toLocaleString("en")} | ${r.ms.toFixed(1)} | ${(r.ms / small!.ms).toFixed(2)}× |`);
}
process.exit(0);
