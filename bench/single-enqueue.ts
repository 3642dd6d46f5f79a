/**
 * Single enqueues (benchmark, not a test): what one `enqueue` call costs when
 * many callers of one Docket enqueue at once (a web server's request
 * handlers), with L other stores listening for ready notices (idle workers
 * in other processes: on PostgreSQL each is a LISTEN session the server
 * signals per notice). Per adapter, on a fresh store, C concurrent callers
 * send N single enqueues of one queue; reported: enqueues per second, and
 * (BENCH_DEBUG) the database server's CPU microseconds per enqueue.
 *
 * With --fair K, each enqueue carries one of K fairness keys (round-robin): what a fair enqueue costs against a plain one.
 *
 *   npx tsx bench/single-enqueue.ts [--adapters postgres,sqlite,mysql] [--jobs 4000] [--callers 20] [--listeners 4] [--runs 3] [--fair 0]
 */
import { parseArgs } from "node:util";
import { Docket } from "../src/index.ts";
import { openDatabase, type AdapterName } from "./databases.ts";
import { SERVER_PROCESSES, cpuSecondsOf } from "./cpu-time.ts";

const { values: args } = parseArgs({
  options: {
    adapters: { type: "string", default: "postgres" },
    jobs: { type: "string", default: "4000" },
    callers: { type: "string", default: "20" },
    listeners: { type: "string", default: "4" },
    runs: { type: "string", default: "3" },
    fair: { type: "string", default: "0" },
  },
  strict: true,
});
const jobs = Number(args.jobs);
const callers = Number(args.callers);
const listeners = Number(args.listeners);
const runs = Number(args.runs);
const fairKeys = Number(args.fair);

console.log(`single enqueues: ${jobs} from ${callers} concurrent callers of one Docket, ${listeners} other stores listening${fairKeys > 0 ? `, ${fairKeys} fairness keys` : ""}`);
for (const name of args.adapters!.split(",") as AdapterName[]) {
  const db = await openDatabase(name);
  try {
    for (let run = 0; run < runs; run++) {
      const pool = name === "postgres" ? { max: callers } : name === "mysql" ? { connectionLimit: callers } : {};
      const adapter = await db.open(run, pool as never);
      const docket = new Docket({ adapter });
      await docket.migrate();
      const others = await Promise.all(Array.from({ length: listeners }, () => db.open(run)));
      let heard = 0;
      const unsubscribe = others.map((o) => o.onReady?.(() => void heard++) ?? (() => undefined));
      await new Promise((r) => setTimeout(r, 500));
      heard = 0;
      const server0 = cpuSecondsOf(SERVER_PROCESSES);
      const t0 = performance.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: callers }, async () => {
          while (next++ < jobs) await docket.enqueue("t", {}, fairKeys > 0 ? { queue: "q", fairness: { key: `k${next % fairKeys}` } } : { queue: "q" });
        }),
      );
      const seconds = (performance.now() - t0) / 1000;
      const server = server0 === null ? null : cpuSecondsOf(SERVER_PROCESSES)! - server0;
      await new Promise((r) => setTimeout(r, 300));
      for (const u of unsubscribe) u();
      const cpu = server === null ? "" : `, server CPU ${((server / jobs) * 1e6).toFixed(0)} us/enqueue`;
      console.log(`${name} run ${run + 1}: ${(jobs / seconds).toFixed(0)} enqueues/s${cpu}; notices heard by each listener ${(heard / Math.max(1, listeners)).toFixed(0)}`);
      await adapter.close();
      for (const o of others) await o.close();
    }
  } finally {
    await db.dispose();
  }
}
