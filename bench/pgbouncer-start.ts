/**
 * Benchmark (issue 27, item 1): how long a job enqueued by another process
 * waits for an idle worker's handler, like for like:
 *  - direct:  worker and producer connect to PostgreSQL itself (LISTEN/NOTIFY);
 *  - pooled:  both go through PgBouncer in transaction mode, the worker's
 *             LISTEN on its own direct connection (`listenConnectionString`);
 *  - polled:  both through PgBouncer with default options (notices cannot
 *             arrive: the worker polls, pollMs 1 s) — for scale.
 * Each sample: a random pause (the worker asleep), then one enqueue by the
 * producer; the time from before the enqueue call to the handler's start.
 * Modes take turns per round, each on its own tables. Reports each mode's
 * p50 and p90 and pooled ÷ direct (the target: p50 within 2×).
 *
 *   npx tsx bench/pgbouncer-start.ts [--samples 10] [--rounds 3]
 */
import { parseArgs } from "node:util";
import { postgresAdapter } from "../src/adapters/postgres/index.ts";
import { Docket } from "../src/index.ts";
import { startPrivatePgbouncer } from "../test/support/private-pgbouncer.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../test/support/targets.ts";

const { values: args } = parseArgs({ options: { samples: { type: "string", default: "10" }, rounds: { type: "string", default: "3" } }, strict: true });
const SAMPLES = Number(args.samples);
const ROUNDS = Number(args.rounds);
type Mode = "direct" | "pooled" | "polled";
const MODES: Mode[] = ["direct", "pooled", "polled"];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;

const created = await createPgTestDatabase("docket_bouncer_bench", "the PgBouncer start-latency benchmark");
if (!created) throw new Error("PostgreSQL is not reachable");
const bouncer = await startPrivatePgbouncer("the PgBouncer start-latency benchmark", 4);
if (!bouncer) throw new Error("pgbouncer is not installed (apt-get install pgbouncer)");

/** `SAMPLES` start latencies of jobs another Docket enqueues, in `mode`, on tables `prefix`. */
async function measure(mode: Mode, prefix: string): Promise<number[]> {
  const url = mode === "direct" ? created!.url : bouncer!.urlFor(created!.url);
  const consumerAdapter = postgresAdapter({ connectionString: url, tablePrefix: prefix, logger: null, ...(mode === "pooled" ? { listenConnectionString: created!.url } : {}) });
  const producerAdapter = postgresAdapter({ connectionString: url, tablePrefix: prefix, logger: null });
  const producer = new Docket({ adapter: producerAdapter });
  const startedAt = new Map<number, number>();
  const worker = new Docket({ adapter: consumerAdapter }).worker({ handlers: { t: (p) => void startedAt.set((p as { i: number }).i, performance.now()) }, logger: null });
  const samples: number[] = [];
  try {
    await producer.migrate();
    await worker.start();
    await sleep(500);
    for (let i = 0; i < SAMPLES; i++) {
      await sleep(200 + Math.random() * 1_000);
      const t0 = performance.now();
      await producer.enqueue("t", { i });
      for (let k = 0; k < 1_000 && !startedAt.has(i); k++) await sleep(1);
      if (!startedAt.has(i)) throw new Error(`${mode}: job ${i} did not start`);
      samples.push(startedAt.get(i)! - t0);
    }
  } finally {
    await worker.stop();
    await consumerAdapter.close();
    await producerAdapter.close();
  }
  return samples;
}

try {
  const all: Record<Mode, number[]> = { direct: [], pooled: [], polled: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const mode of MODES) all[mode].push(...(await measure(mode, `b${round}${mode[0]}_`)));
  }
  console.log(`PgBouncer 1.18 (transaction mode) start latency, a job another process enqueues to an idle worker; ${ROUNDS} rounds x ${SAMPLES} samples per mode`);
  console.log("| mode | p50 ms | p90 ms |");
  console.log("|---|---|---|");
  for (const mode of MODES) console.log(`| ${mode} | ${quantile(all[mode], 0.5).toFixed(1)} | ${quantile(all[mode], 0.9).toFixed(1)} |`);
  console.log(`pooled / direct, p50: ${(quantile(all.pooled, 0.5) / quantile(all.direct, 0.5)).toFixed(2)} (target <= 2)`);
} finally {
  await bouncer.destroy();
  await dropPgDatabase(PG_URL, created.database);
}
