/**
 * Fair sharing benchmark (issue 25 item 2): does a flooding key hold the
 * other keys back, and what does fairness cost? Per adapter, on a fresh
 * store per scenario, W docket workers of concurrency C run in THIS process
 * (each on its own adapter, so its own pool; not separate processes: a
 * shortcut of this first cut), polling every --poll-ms, handlers no-ops:
 *
 *   idle:   S small keys each enqueue one job every --every-ms for --idle-s
 *           seconds on an empty fair queue;
 *   flood:  one key enqueues N jobs (batches of 1,000) while the S small keys
 *           enqueue as above until the flood has drained;
 *   plain:  the same N jobs without fairness keys, no small keys.
 *
 * Reported: the small keys' start latency (enqueue → handler start, one wall
 * clock), p50/p99, under the flood against idle (ratio); and the flood's
 * throughput (N over first enqueue → last start) with fairness against plain
 * (ratio). Targets: p99 ratio ≤ 2, throughput cost ≤ 10%.
 *
 *   npx tsx bench/fairness.ts [--adapters sqlite,postgres,mysql] [--jobs 20000] [--small 100] [--every-ms 100]
 *     [--workers 4] [--concurrency 10] [--poll-ms 50] [--idle-s 3]
 */
import { Docket } from "../src/index.ts";
import type { DocketAdapter } from "../src/core/adapter.ts";
import { openDatabase, type AdapterName, type Database } from "./databases.ts";
import { wallNow } from "./children.ts";

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!);
const adapters = (args.get("adapters") ?? "sqlite,postgres,mysql").split(",") as AdapterName[];
const jobs = Number(args.get("jobs") ?? 20000);
const small = Number(args.get("small") ?? 100);
const everyMs = Number(args.get("every-ms") ?? 100);
const workers = Number(args.get("workers") ?? 4);
const concurrency = Number(args.get("concurrency") ?? 10);
const pollMs = Number(args.get("poll-ms") ?? 50);
const idleS = Number(args.get("idle-s") ?? 3);

interface Measured {
  latencies: number[];
  floodStarted: number;
  floodFirst: number;
  floodLast: number;
}

const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};

async function scenario(db: Database, n: number, kind: "idle" | "flood" | "plain"): Promise<Measured> {
  const adapter = await db.open(n);
  const client = new Docket({ adapter });
  await client.migrate();
  const m: Measured = { latencies: [], floodStarted: 0, floodFirst: 0, floodLast: 0 };
  const stores: DocketAdapter[] = [];
  const ws = [];
  for (let i = 0; i < workers; i++) {
    const a = await db.open(n);
    stores.push(a);
    const d = new Docket({ adapter: a });
    ws.push(
      d.worker({
        queues: ["fair"],
        concurrency,
        pollMs,
        logger: null,
        handlers: {
          small: async (p: { at: number }) => void m.latencies.push(wallNow() - p.at),
          flood: async () => {
            m.floodStarted++;
            m.floodLast = wallNow();
          },
        },
      } as never),
    );
  }
  for (const w of ws) await w.start();
  let producing = true;
  const producers = kind === "plain" ? [] : Array.from({ length: small }, (_, k) =>
    (async () => {
      await new Promise((r) => setTimeout(r, Math.random() * everyMs));
      while (producing) {
        await client.enqueue("small", { at: wallNow() }, { queue: "fair", fairness: { key: `small:${k}` } } as never).catch(() => undefined);
        await new Promise((r) => setTimeout(r, everyMs));
      }
    })(),
  );
  if (kind === "idle") {
    await new Promise((r) => setTimeout(r, idleS * 1000));
  } else {
    m.floodFirst = wallNow();
    for (let i = 0; i < jobs; i += 1000) {
      const batch = Array.from({ length: Math.min(1000, jobs - i) }, () => ({ task: "flood", payload: {}, options: { queue: "fair", ...(kind === "flood" ? { fairness: { key: "flood" } } : {}) } }));
      await client.enqueueMany(batch as never);
    }
    const deadline = Date.now() + 300_000;
    while (m.floodStarted < jobs && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  }
  producing = false;
  await Promise.all(producers);
  await new Promise((r) => setTimeout(r, 300));
  for (const w of ws) await w.stop();
  for (const a of stores) await a.close();
  await adapter.close();
  return m;
}

const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};
say(`fairness benchmark: ${jobs} flood jobs, ${small} small keys × 1 job / ${everyMs} ms, ${workers} workers × concurrency ${concurrency} in one process, poll ${pollMs} ms`);
for (const name of adapters) {
  const db = await openDatabase(name);
  try {
    const idle = await scenario(db, 1, "idle");
    const flood = await scenario(db, 2, "flood");
    const plain = await scenario(db, 3, "plain");
    const rate = (x: Measured) => x.floodStarted / ((x.floodLast - x.floodFirst) / 1000);
    const p99i = pct(idle.latencies, 99);
    const p99f = pct(flood.latencies, 99);
    say(
      `${name}: small-key start latency idle p50 ${pct(idle.latencies, 50).toFixed(1)} ms p99 ${p99i.toFixed(1)} ms (${idle.latencies.length} jobs); ` +
        `under flood p50 ${pct(flood.latencies, 50).toFixed(1)} ms p99 ${p99f.toFixed(1)} ms (${flood.latencies.length} jobs); p99 ratio ${(p99f / p99i).toFixed(2)}×`,
    );
    say(
      `${name}: flood throughput with fairness ${rate(flood).toFixed(0)} jobs/s (${flood.floodStarted}/${jobs}), without ${rate(plain).toFixed(0)} jobs/s (${plain.floodStarted}/${jobs}); ratio ${(rate(flood) / rate(plain)).toFixed(2)}`,
    );
  } finally {
    await db.dispose();
  }
}
