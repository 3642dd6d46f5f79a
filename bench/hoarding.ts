/**
 * Hoarding benchmark (issue 24 item 4): four workers of concurrency 1 in
 * one process, on one queue, drain 40 jobs whose handlers take 100 ms,
 * (a) under a queue cap of 4, (b) all with one concurrency key of limit 4;
 * each with the default prefetch and with `prefetch: 0`. A worker that
 * buffered a constrained job would hold a cap's or key's slot while no
 * handler runs it, so fewer than 4 would run at once. Reports the wall time
 * (the ideal is 40 × 100 ms / 4 = 1 s plus claims), the most handlers
 * running at once, and how the jobs split between the workers.
 *
 *   npx tsx bench/hoarding.ts [--adapters sqlite,postgres,mysql] [--jobs 40] [--handler-ms 100] [--runs 3]
 */
import { Docket } from "../src/index.ts";
import { openDatabase, type AdapterName } from "./databases.ts";

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!);
const adapters = (args.get("adapters") ?? "sqlite,postgres,mysql").split(",") as AdapterName[];
const jobs = Number(args.get("jobs") ?? 40);
const handlerMs = Number(args.get("handler-ms") ?? 100);
const runs = Number(args.get("runs") ?? 3);
const WORKERS = 4;

interface Result {
  adapter: string;
  control: string;
  prefetch: string;
  run: number;
  ms: number;
  maxRunning: number;
  split: number[];
}

const results: Result[] = [];
let n = 0;
for (let run = 1; run <= runs; run++) {
  for (const adapterName of adapters) {
    const db = await openDatabase(adapterName);
    try {
      for (const control of ["cap 4", "key limit 4"]) {
        for (const prefetch of ["default", "0"]) {
          const store = await db.open(++n);
          const docket = new Docket({ adapter: store });
          await docket.migrate();
          if (control === "cap 4") await docket.setQueueCap("default", 4);
          const options = control === "cap 4" ? {} : { options: { concurrency: { key: "k", limit: 4 } } };
          await docket.enqueueMany(Array.from({ length: jobs }, (_, i) => ({ task: "slow", payload: i, ...options })));
          let running = 0;
          let maxRunning = 0;
          let done = 0;
          let finish!: () => void;
          const all = new Promise<void>((r) => (finish = r));
          const split = Array.from({ length: WORKERS }, () => 0);
          const workers = split.map((_, w) =>
            docket.worker({
              concurrency: 1,
              logger: null,
              pollMs: 200,
              ...(prefetch === "0" ? { prefetch: 0 } : {}),
              handlers: {
                slow: async () => {
                  running++;
                  maxRunning = Math.max(maxRunning, running);
                  split[w]!++;
                  await new Promise((r) => setTimeout(r, handlerMs));
                  running--;
                  if (++done === jobs) finish();
                },
              },
            }),
          );
          const t0 = performance.now();
          await Promise.all(workers.map((w) => w.start()));
          await all;
          const ms = performance.now() - t0;
          await Promise.all(workers.map((w) => w.stop()));
          await store.close();
          results.push({ adapter: adapterName, control, prefetch, run, ms, maxRunning, split });
          console.error(`${adapterName} ${control} prefetch ${prefetch} run ${run}: ${ms.toFixed(0)} ms, at most ${maxRunning} running, split ${split.join("/")}`);
        }
      }
    } finally {
      await db.dispose();
    }
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`| adapter | control | prefetch | wall ms (median of ${runs}) | spread | most running at once (min over runs) | split of the jobs (run 1) |`);
console.log("|---|---|---|---|---|---|---|");
for (const adapter of adapters) {
  for (const control of ["cap 4", "key limit 4"]) {
    for (const prefetch of ["default", "0"]) {
      const rs = results.filter((r) => r.adapter === adapter && r.control === control && r.prefetch === prefetch);
      const ms = rs.map((r) => r.ms);
      console.log(
        `| ${adapter} | ${control} | ${prefetch} | ${median(ms).toFixed(0)} | ${Math.min(...ms).toFixed(0)}–${Math.max(...ms).toFixed(0)} | ${Math.min(...rs.map((r) => r.maxRunning))} | ${rs[0]!.split.join("/")} |`,
      );
    }
  }
}
process.exit(0);
