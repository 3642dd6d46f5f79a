/**
 * Debounce benchmark (issue 25, item 3): on each adapter, B bursts of E
 * enqueues, each burst under a debounce key of its own, while a worker in
 * this process drains; then the same B × E enqueues without debounce, in
 * the same run, for the enqueue rate beside it.
 *
 *   npx tsx bench/debounce.ts [--systems sqlite,postgres,mysql] [--bursts 1000] [--enqueues 50]
 *     [--in-flight 10] [--chains 5] [--delay-ms 5000] [--limit 120]
 *
 * Shape: `--in-flight` bursts are enqueued at once (their keys interleave);
 * each burst's E enqueues go out as `--chains` concurrent chains, so
 * enqueues of one key also race each other (the unique index of pending
 * keys) and, once a burst's job falls due, the worker's claim (R22). Every
 * burst's enqueues end well within `--delay-ms` of each other, so each
 * burst must run exactly once: the runs are counted per key (0 lost, 0
 * doubled), and each run's payload must be one of its burst's. The worker
 * (concurrency 10, polling every 50 ms) uses its own connections.
 *
 * Rates: enqueues per second over the burst phase (from the first enqueue
 * to the last one's return; the worker draining meanwhile) and over the
 * plain phase (the same number of enqueues, the same concurrency, no
 * debounce, no worker, a fresh store), and their ratio.
 */
import { Docket } from "../src/index.ts";
import { openDatabase, type AdapterName } from "./databases.ts";

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!);
const systems = (args.get("systems") ?? "sqlite,postgres,mysql").split(",") as AdapterName[];
const bursts = Number(args.get("bursts") ?? 1000);
const perBurst = Number(args.get("enqueues") ?? 50);
const inFlight = Number(args.get("in-flight") ?? 10);
const chains = Number(args.get("chains") ?? 5);
const delayMs = Number(args.get("delay-ms") ?? 5000);
const limitSec = Number(args.get("limit") ?? 120);
for (const [name, value] of Object.entries({ bursts, enqueues: perBurst, "in-flight": inFlight, chains, "delay-ms": delayMs, limit: limitSec })) {
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer, got ${args.get(name)}`);
}

const TASK = "bench.debounce";

/** Runs `bursts` bursts, `inFlight` at a time; each burst's `perBurst` enqueues in `chains` concurrent chains. */
async function enqueueAll(enqueue: (burst: number, n: number) => Promise<unknown>): Promise<{ ms: number; longestBurstMs: number }> {
  let next = 0;
  let longestBurstMs = 0;
  const started = performance.now();
  const lane = async () => {
    for (let b = next++; b < bursts; b = next++) {
      const begun = performance.now();
      await Promise.all(
        Array.from({ length: chains }, async (_, c) => {
          for (let n = c; n < perBurst; n += chains) await enqueue(b, n);
        }),
      );
      longestBurstMs = Math.max(longestBurstMs, performance.now() - begun);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return { ms: performance.now() - started, longestBurstMs };
}

interface Result {
  system: AdapterName;
  debounceRate: number;
  plainRate: number;
  longestBurstMs: number;
  stored: number;
  runs: number;
  lost: number;
  doubled: number;
  foreign: number;
  drainSec: number;
}

async function runSystem(system: AdapterName): Promise<Result> {
  const db = await openDatabase(system);
  try {
    // Burst phase: one store, the producer's adapter and the worker's.
    const producer = await db.open(1);
    await producer.migrate();
    const consumer = await db.open(1);
    const docket = new Docket({ adapter: producer });
    const runsByKey = new Map<string, number[]>();
    let runs = 0;
    const worker = new Docket({ adapter: consumer }).worker({
      concurrency: 10,
      pollMs: 50,
      handlers: {
        [TASK]: async (payload) => {
          const { b, n } = payload as { b: number; n: number };
          const key = `burst-${b}`;
          runsByKey.set(key, [...(runsByKey.get(key) ?? []), n]);
          runs++;
        },
      },
    });
    await worker.start();
    const debounced = await enqueueAll((b, n) => docket.enqueue(TASK, { b, n }, { debounce: { key: `burst-${b}`, delayMs } }));
    const drainStart = performance.now();
    const deadline = Date.now() + limitSec * 1000;
    while (runs < bursts && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const drainSec = (performance.now() - drainStart) / 1000;
    // Past the drain, a little longer: a doubled burst would run now.
    await new Promise((r) => setTimeout(r, delayMs + 500));
    await worker.stop();
    const stored = (await docket.list({ limit: 10 * bursts })).length;
    let lost = 0;
    let doubled = 0;
    let foreign = 0;
    for (let b = 0; b < bursts; b++) {
      const got = runsByKey.get(`burst-${b}`) ?? [];
      if (got.length === 0) lost++;
      if (got.length > 1) doubled++;
      foreign += got.filter((n) => !(Number.isInteger(n) && n >= 0 && n < perBurst)).length;
    }
    await producer.close();
    await consumer.close();

    // Plain phase: a fresh store, the same enqueues without debounce, no worker.
    const plainAdapter = await db.open(2);
    await plainAdapter.migrate();
    const plain = new Docket({ adapter: plainAdapter });
    const undebounced = await enqueueAll((b, n) => plain.enqueue(TASK, { b, n }));
    await plainAdapter.close();

    const total = bursts * perBurst;
    return {
      system,
      debounceRate: total / (debounced.ms / 1000),
      plainRate: total / (undebounced.ms / 1000),
      longestBurstMs: debounced.longestBurstMs,
      stored,
      runs,
      lost,
      doubled,
      foreign,
      drainSec,
    };
  } finally {
    await db.dispose();
  }
}

console.log(
  `debounce: ${bursts} bursts × ${perBurst} enqueues (${bursts * perBurst}), ${inFlight} bursts in flight, ${chains} chains per burst, delayMs ${delayMs}; ` +
    `node ${process.version}, ${new Date().toISOString()}`,
);
const results: Result[] = [];
for (const system of systems) {
  const r = await runSystem(system);
  results.push(r);
  const ok = r.runs === bursts && r.lost === 0 && r.doubled === 0 && r.foreign === 0 && r.stored === bursts;
  console.log(
    `${system}: runs ${r.runs} of ${bursts} bursts (lost ${r.lost}, doubled ${r.doubled}, foreign payloads ${r.foreign}; jobs stored ${r.stored}) ${ok ? "OK" : "FAILED"}; ` +
      `longest burst ${r.longestBurstMs.toFixed(0)} ms; drained ${r.drainSec.toFixed(1)} s after the last enqueue`,
  );
}
console.log("");
console.log("| adapter | runs | lost | doubled | debounced enqueues/s | plain enqueues/s | debounced ÷ plain |");
console.log("|---|---|---|---|---|---|---|");
for (const r of results) {
  console.log(`| ${r.system} | ${r.runs} | ${r.lost} | ${r.doubled} | ${r.debounceRate.toFixed(0)} | ${r.plainRate.toFixed(0)} | ${(r.debounceRate / r.plainRate).toFixed(2)} |`);
}
if (results.some((r) => r.runs !== bursts || r.lost > 0 || r.doubled > 0 || r.foreign > 0 || r.stored !== bursts)) process.exitCode = 1;
