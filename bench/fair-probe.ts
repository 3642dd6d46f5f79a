/**
 * Probe (not a benchmark of record): what one claim of a fair queue costs.
 * One session claims `--limit` jobs at a time (and completes them) until a
 * queue of N flood-key jobs plus S small keys of one job each is drained,
 * against the same jobs without fairness keys; prints the time per claim
 * and the statements per claim by label (a subquery built apart, such as a
 * UNION ALL's part, counts once too).
 *
 *   npx tsx bench/fair-probe.ts [sqlite|postgres|mysql] [--jobs 5000] [--small 100] [--limit 10]
 */
import { Docket } from "../src/index.ts";
import { openDatabase, type AdapterName } from "./databases.ts";
import type { KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs, QueryResult, RootOperationNode, UnknownRow } from "kysely";

const system = (process.argv[2] ?? "sqlite") as AdapterName;
const arg = (n: string, d: string) => (process.argv.indexOf(`--${n}`) === -1 ? d : process.argv[process.argv.indexOf(`--${n}`) + 1]!);
const jobs = Number(arg("jobs", "5000"));
const small = Number(arg("small", "100"));
const limit = Number(arg("limit", "10"));
let counting = false;
const kinds = new Map<string, number>();
const counter: KyselyPlugin = {
  transformQuery(a: PluginTransformQueryArgs): RootOperationNode {
    if (counting) {
      const m = JSON.stringify(a.node).match(/docket:([a-z-]+)/);
      const k = m ? m[1]! : a.node.kind === "SelectQueryNode" ? `select:${JSON.stringify(a.node).match(/"name":"([a-z0-9_]+)"/g)?.slice(0,3).join("|")}` : a.node.kind;
      kinds.set(k, (kinds.get(k) ?? 0) + 1);
    }
    return a.node;
  },
  transformResult: async (a: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> => a.result,
};
const db = await openDatabase(system);
try {
  for (const [n, fair] of [[1, true], [2, false]] as const) {
    const store = await db.open(n, { instrument: { plugins: [counter] } });
    const docket = new Docket({ adapter: store });
    await docket.migrate();
    const opt = (key: string) => ({ queue: "fair", ...(fair ? { fairness: { key } } : {}) });
    for (let i = 0; i < jobs; i += 1000) await docket.enqueueMany(Array.from({ length: Math.min(1000, jobs - i) }, () => ({ task: "flood", payload: {}, options: opt("flood") })));
    await docket.enqueueMany(Array.from({ length: small }, (_, k) => ({ task: "small", payload: {}, options: opt(`small:${k}`) })));
    let claims = 0, taken = 0;
    kinds.clear();
    const t0 = performance.now();
    let ms = 0;
    while (taken < jobs + small) {
      const now = Date.now();
      counting = true;
      const c0 = performance.now();
      const got = await store.claim({ queues: ["fair"], limit, now, leaseToken: `t${claims}`, leaseExpiresAt: now + 60_000 });
      ms += performance.now() - c0;
      counting = false;
      claims++;
      taken += got.length;
      if (got.length === 0) break;
      await store.settle({ items: got.map((j) => ({ kind: "complete", id: j.id, leaseToken: j.leaseToken!, now: Date.now(), result: null })) } as never);
    }
    const total = performance.now() - t0;
    console.log(`${system} ${fair ? "fair " : "plain"}: ${claims} claims, ${(ms / claims).toFixed(2)} ms/claim, ${((jobs / total) * 1000).toFixed(0)} flood jobs/s overall; statements/claim ${[...kinds].map(([k, v]) => `${k} ${(v / claims).toFixed(1)}`).join(", ")}`);
    await store.close();
  }
} finally {
  await db.dispose();
}
