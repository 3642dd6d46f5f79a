/**
 * Probe (not a benchmark of record): where a capped drain's time goes. One
 * worker of concurrency 50 drains 5,000 no-op jobs of a queue with a cap of
 * N (0: no cap) on one adapter, and prints the rate with the adapter calls
 * it took: claims (and how many came back empty), plain outcome writes
 * (`settle`), and jobs claimed by hand-offs (`settleAndHandOff`).
 *
 *   npx tsx bench/cap-probe.ts postgres 10
 *   NO_HANDOFF=1 npx tsx bench/cap-probe.ts postgres 10   # the adapter without its hand-off
 */
import { Docket } from "../src/index.ts";
import { openDatabase, type AdapterName } from "./databases.ts";

const system = (process.argv[2] ?? "postgres") as AdapterName;
const cap = Number(process.argv[3] ?? 10);
const n = 5000;
const database = await openDatabase(system);
const store = await database.open(1);
const stats = { claims: 0, empty: 0, claimed: 0, claimMs: 0, settles: 0, handOffs: 0, handed: 0 };
const claim = store.claim.bind(store);
store.claim = async (p) => {
  const t = performance.now();
  const r = await claim(p);
  stats.claimMs += performance.now() - t;
  stats.claims++;
  if (r.length === 0) stats.empty++;
  stats.claimed += r.length;
  return r;
};
const settle = store.settle.bind(store);
store.settle = (p) => (stats.settles++, settle(p));
const handOff = store.settleAndHandOff?.bind(store);
const writable = store as { settleAndHandOff?: typeof store.settleAndHandOff };
writable.settleAndHandOff =
  handOff && !process.env.NO_HANDOFF
    ? async (p) => {
        const r = await handOff(p);
        stats.handOffs++;
        stats.handed += r.claimed.length;
        return r;
      }
    : undefined;
const docket = new Docket({ adapter: store });
await docket.migrate();
if (cap > 0) await docket.setQueueCap("default", cap);
for (let i = 0; i < n; i += 1000) await docket.enqueueMany(Array.from({ length: 1000 }, (_, k) => ({ task: "noop", payload: { i: i + k } })));
let done = 0;
let end!: () => void;
const all = new Promise<void>((r) => (end = r));
const worker = docket.worker({
  concurrency: 50,
  logger: null,
  handlers: { noop: async () => undefined },
  onEvent: (e) => {
    if (e.type === "succeeded" && ++done === n) end();
  },
});
const t0 = performance.now();
await worker.start();
await all;
const ms = performance.now() - t0;
await worker.stop();
console.log(`${system} cap ${cap}: ${Math.round((n / ms) * 1000)} jobs/s`, JSON.stringify({ ...stats, claimMs: Math.round(stats.claimMs), wallMs: Math.round(ms) }));
await store.close();
await database.dispose();
