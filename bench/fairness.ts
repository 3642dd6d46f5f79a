/**
 * Fair sharing benchmark (issue 25 item 6b): does a flooding key hold the
 * other keys back, and what does fairness cost? Per adapter, on a fresh
 * store per scenario, W worker processes (bench/fairness-child.ts) of
 * concurrency C poll every --poll-ms, handlers no-ops; this process
 * enqueues:
 *
 *   idle:   S small keys each enqueue one job every --every-ms for --idle-s
 *           seconds on an empty fair queue;
 *   flood:  one key enqueues N jobs (batches of 1,000, one after another, from
 *           a process of its own: bench/fairness-flood.ts) while the S small
 *           keys enqueue as above until the flood has drained;
 *   plain:  the same workload (N flood jobs, S small producers) without
 *           fairness keys;
 *   separate (with --separate 1): the flood on a queue of its own, served by
 *           a second worker of concurrency C in each worker process, the
 *           small keys on their queue as when idle: no scheduler shares
 *           slots between them, so the small keys' latency there is what
 *           the flood's load on the machine alone costs them (a floor for
 *           any fair sharing of one queue's slots on this machine).
 *
 * --flood arriving (the default) enqueues the flood while the workers drain
 * it, so its throughput is bounded by its one producer's enqueues (on a
 * saturated machine, what a fair job costs to store). --flood standing
 * stores the whole flood first, its queue paused, and measures from the
 * queue's resumption: the flood is a backlog of N jobs ahead of every small
 * key, and its throughput is the workers' drain of it (what fairness costs
 * the claims).
 *
 * Each scenario first runs --warm-s seconds (default 1) of the small
 * producers alone, unmeasured: the producers' pool opens its connections
 * and every process plans its statements (that second's latencies were
 * ~500 ms at p99 in every scenario and hid the others).
 *
 * Reported: the small keys' start latency (enqueue call → handler start, one
 * wall clock), p50/p99, under the flood against idle (ratio); the same from
 * the enqueue's return (what waiting for the worker costs, without the
 * enqueue's own time on a loaded machine); and the flood's
 * throughput (N over first enqueue → last start) with fairness against
 * plain (ratio), and the total throughput in that window (the small keys'
 * jobs started in it counted too: small producers wait for each enqueue,
 * so how many they store depends on the run). Targets: p99 ratio ≤ 2,
 * throughput cost ≤ 10%.
 *
 *   npx tsx bench/fairness.ts [--adapters sqlite,postgres,mysql] [--jobs 20000] [--small 100] [--every-ms 100]
 *     [--workers 4] [--concurrency 10] [--poll-ms 50] [--idle-s 3] [--warm-s 1] [--runs 1] [--order flood,plain|plain,flood]
 *     [--flood arriving|standing] [--separate 1]
 */
import { Docket } from "../src/index.ts";
import { openDatabase, type AdapterName, type Database } from "./databases.ts";
import { startChild, wallNow } from "./children.ts";
import { SERVER_PROCESSES, cpuSecondsOf } from "./cpu-time.ts";

const CHILD = new URL("./fairness-child.ts", import.meta.url).pathname;
const FLOODER = new URL("./fairness-flood.ts", import.meta.url).pathname;

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
const warmS = Number(args.get("warm-s") ?? 1);
const runs = Number(args.get("runs") ?? 1);
const order = args.get("order") ?? "flood,plain";
if (order !== "flood,plain" && order !== "plain,flood") throw new Error(`--order must be flood,plain or plain,flood, got ${order}`);
const floodMode = args.get("flood") ?? "arriving";
if (floodMode !== "arriving" && floodMode !== "standing") throw new Error(`--flood must be arriving or standing, got ${floodMode}`);
const separate = args.get("separate") === "1";

interface Measured {
  /** Small jobs enqueued after the warm-up: enqueue call → handler start, ms. */
  latencies: number[];
  /** The same jobs' enqueue return → handler start, ms. */
  afterStored: number[];
  floodStarted: number;
  /** Every small job's start (wall clock), warm-up included: the total rate counts those in the flood's window. */
  smallStarts: number[];
  floodFirst: number;
  floodLast: number;
  /** Each worker process's own CPU seconds at its end (BENCH_DEBUG). */
  workerCpu: number[];
}

const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};

type Kind = "idle" | "flood" | "plain" | "separate";

async function scenario(db: Database, n: number, kind: Kind): Promise<Measured> {
  // The producers' store: a pool as large as its producers (a hundred tenants' web servers do not queue on four connections).
  // (At most 40: PostgreSQL's default max_connections is 100, and the workers hold 16.)
  const size = Math.min(small, 40);
  const pool = db.spec(n).adapter === "postgres" ? { max: size } : db.spec(n).adapter === "mysql" ? { connectionLimit: size } : {};
  const adapter = await db.open(n, pool as never);
  const client = new Docket({ adapter });
  await client.migrate();
  const m: Measured = { latencies: [], afterStored: [], smallStarts: [], floodStarted: 0, floodFirst: 0, floodLast: 0, workerCpu: [] };
  const childArgs = [CHILD, JSON.stringify(db.spec(n)), String(concurrency), String(pollMs), ...(kind === "separate" ? ["separate"] : [])];
  const children = Array.from({ length: workers }, () => startChild(childArgs));
  const flooder = kind === "idle" ? null : startChild([FLOODER, JSON.stringify(db.spec(n)), String(jobs), kind === "flood" ? "fair" : kind]);
  const floodQueue = kind === "separate" ? "bulk" : "fair";
  await Promise.all([...children, ...(flooder ? [flooder] : [])].map((c) => c.next((x) => x.ready === true)));
  const started = new Map<number, number>();
  const progress = children.map((c, i) =>
    (async () => {
      for (;;) {
        const x = await c.next((y) => y.progress === false || y.done === true);
        if (x.done) return x;
        started.set(i, Number(x.flood));
      }
    })(),
  );
  const floodStarted = () => [...started.values()].reduce((a, b) => a + b, 0);
  let producing = true;
  /** While the standing flood is stored, the small producers wait (their jobs would join the backlog). */
  let holding = false;
  let measureFrom = Number.POSITIVE_INFINITY;
  /** Each small job's id → when its enqueue returned. */
  const stored = new Map<number, number>();
  const enqueueMs: number[] = [];
  let failed = 0;
  let floodEnqueuedMs = 0;
  const producers = Array.from({ length: small }, (_, k) =>
    (async () => {
      await new Promise((r) => setTimeout(r, Math.random() * everyMs));
      while (producing) {
        if (holding) {
          await new Promise((r) => setTimeout(r, everyMs));
          continue;
        }
        const fairness = kind === "plain" ? {} : { fairness: { key: `small:${k}` } };
        const at = wallNow();
        const job = await client.enqueue("small", { at }, { queue: "fair", ...fairness } as never).catch(() => void failed++);
        if (job) stored.set(Number((job as { id: unknown }).id), wallNow());
        if (at >= measureFrom) enqueueMs.push(wallNow() - at);
        await new Promise((r) => setTimeout(r, everyMs));
      }
    })(),
  );
  // Warm-up, not measured: the producers' pool opens its connections, and every process's statements get planned.
  await new Promise((r) => setTimeout(r, warmS * 1000));
  const standing = kind !== "idle" && floodMode === "standing";
  const floodEnd = () => flooder!.next((x) => x.done === true || x.error !== undefined);
  let floodDone: Promise<Record<string, unknown>> | null = null;
  if (standing) {
    // The whole flood stored before the measured part: the queue paused while it is, resumed when measuring starts.
    holding = true;
    await client.pauseQueue(floodQueue);
    flooder!.send({ go: true });
    floodDone = floodEnd();
    await floodDone;
    // Small jobs stored before the pause that had not started start after it: they are not measured (stored before measureFrom).
    await client.resumeQueue(floodQueue);
    holding = false;
  }
  measureFrom = wallNow();
  const server0 = cpuSecondsOf(SERVER_PROCESSES);
  const self0 = process.cpuUsage();
  if (kind === "idle") {
    await new Promise((r) => setTimeout(r, idleS * 1000));
  } else {
    if (!standing) flooder!.send({ go: true });
    const done = await (floodDone ?? floodEnd());
    if (done.error !== undefined) throw new Error(`the flood's enqueue failed: ${String(done.error)}`);
    m.floodFirst = standing ? measureFrom : Number(done.first);
    floodEnqueuedMs = Number(done.enqueuedMs);
    const deadline = Date.now() + 300_000;
    while (floodStarted() < jobs && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  }
  producing = false;
  const serverCpu = server0 === null ? null : cpuSecondsOf(SERVER_PROCESSES)! - server0;
  const selfCpu = process.cpuUsage(self0);
  await Promise.all(producers);
  await new Promise((r) => setTimeout(r, 300));
  for (const c of children) c.send({ stop: true });
  for (const r of await Promise.all(progress)) {
    // The small jobs enqueued after the warm-up.
    const ats = r.ats as number[];
    const starts = r.starts as [number, number][];
    for (const [, start] of starts) m.smallStarts.push(start);
    (r.latencies as number[]).forEach((l, i) => {
      if (ats[i]! < measureFrom) return;
      m.latencies.push(l);
      const [id, start] = starts[i]!;
      if (stored.has(id)) m.afterStored.push(start - stored.get(id)!);
    });
    m.floodStarted += Number(r.flood);
    m.floodLast = Math.max(m.floodLast, Number(r.floodLast));
    if (typeof r.cpu === "number") m.workerCpu.push(r.cpu);
  }
  await adapter.close();
  if (failed > 0) console.log(`  ${kind}: ${failed} small enqueues failed`);
  if (process.env.BENCH_DEBUG && kind !== "idle") console.log(`  ${kind}: the flood's ${jobs} jobs enqueued in ${floodEnqueuedMs.toFixed(0)} ms`);
  if (process.env.BENCH_DEBUG) {
    const workersCpu = m.workerCpu.reduce((a, b) => a + b, 0);
    console.log(`  ${kind}: CPU seconds: database server ${serverCpu?.toFixed(2) ?? "?"}, producers (this process) ${((selfCpu.user + selfCpu.system) / 1e6).toFixed(2)}, workers ${workersCpu.toFixed(2)} (each from its start)`);
  }
  if (process.env.BENCH_DEBUG) console.log(`  ${kind}: enqueue p50 ${pct(enqueueMs, 50).toFixed(1)} ms p99 ${pct(enqueueMs, 99).toFixed(1)} ms (${enqueueMs.length})`);
  return m;
}

const lines: string[] = [];
const say = (s: string) => {
  console.log(s);
  lines.push(s);
};
say(`fairness benchmark: ${jobs} flood jobs (${floodMode}), ${small} small keys × 1 job / ${everyMs} ms, ${workers} workers × concurrency ${concurrency} in ${workers} processes, poll ${pollMs} ms`);
for (const name of adapters) {
  const db = await openDatabase(name);
  /** Per run: the p99 ratio from the call, from the return, the flood's throughput ratio, and (--separate) the p99 ratio with the flood on a queue of its own. */
  const ratios: [number, number, number, number][] = [];
  try {
    for (let run = 0; run < runs; run++) {
      const base = run * 4;
      const idle = await scenario(db, base + 1, "idle");
      // --order plain,flood runs the scenario without fairness keys first (a check that the order does not decide the ratio).
      const plainFirst = order === "plain,flood";
      const plain0 = plainFirst ? await scenario(db, base + 3, "plain") : null;
      const flood = await scenario(db, base + 2, "flood");
      const plain = plain0 ?? (await scenario(db, base + 3, "plain"));
      const apart = separate ? await scenario(db, base + 4, "separate") : null;
      const rate = (x: Measured) => x.floodStarted / ((x.floodLast - x.floodFirst) / 1000);
      // Every job started in the flood's window, the small keys' too (the issue's "total throughput").
      const total = (x: Measured) => (x.floodStarted + x.smallStarts.filter((t) => t >= x.floodFirst && t <= x.floodLast).length) / ((x.floodLast - x.floodFirst) / 1000);
      const p99i = pct(idle.latencies, 99);
      const p99f = pct(flood.latencies, 99);
      say(
        `${name}: small-key start latency idle p50 ${pct(idle.latencies, 50).toFixed(1)} ms p99 ${p99i.toFixed(1)} ms (${idle.latencies.length} jobs); ` +
          `under flood p50 ${pct(flood.latencies, 50).toFixed(1)} ms p99 ${p99f.toFixed(1)} ms (${flood.latencies.length} jobs); p99 ratio ${(p99f / p99i).toFixed(2)}×` +
          `; without fairness keys under the flood p50 ${pct(plain.latencies, 50).toFixed(1)} ms p99 ${pct(plain.latencies, 99).toFixed(1)} ms`,
      );
      const after = (x: Measured) => `p50 ${pct(x.afterStored, 50).toFixed(1)} ms p99 ${pct(x.afterStored, 99).toFixed(1)} ms`;
      say(
        `${name}: the same from the enqueue's return: idle ${after(idle)}; under flood ${after(flood)}; p99 ratio ${(pct(flood.afterStored, 99) / pct(idle.afterStored, 99)).toFixed(2)}×; without fairness keys ${after(plain)}`,
      );
      say(
        `${name}: flood throughput with fairness ${rate(flood).toFixed(0)} jobs/s (${flood.floodStarted}/${jobs}), without ${rate(plain).toFixed(0)} jobs/s (${plain.floodStarted}/${jobs}); ratio ${(rate(flood) / rate(plain)).toFixed(2)}`,
      );
      say(`${name}: total throughput in the flood's window (small keys' jobs too) with fairness ${total(flood).toFixed(0)} jobs/s, without ${total(plain).toFixed(0)} jobs/s; ratio ${(total(flood) / total(plain)).toFixed(2)}`);
      if (apart) {
        say(
          `${name}: with the flood on a queue of its own (own slots): small-key p50 ${pct(apart.latencies, 50).toFixed(1)} ms p99 ${pct(apart.latencies, 99).toFixed(1)} ms (${apart.latencies.length} jobs); p99 ratio to idle ${(pct(apart.latencies, 99) / p99i).toFixed(2)}×` +
            `; from the return ${after(apart)}, ratio ${(pct(apart.afterStored, 99) / pct(idle.afterStored, 99)).toFixed(2)}×; flood ${rate(apart).toFixed(0)} jobs/s (${apart.floodStarted}/${jobs})`,
        );
      }
      ratios.push([p99f / p99i, pct(flood.afterStored, 99) / pct(idle.afterStored, 99), rate(flood) / rate(plain), apart ? pct(apart.latencies, 99) / p99i : NaN]);
    }
    if (runs > 1) {
      const median = (i: number) => [...ratios.map((r) => r[i]!)].sort((a, b) => a - b)[Math.floor(ratios.length / 2)]!;
      const spread = (i: number) => `${Math.min(...ratios.map((r) => r[i]!)).toFixed(2)}–${Math.max(...ratios.map((r) => r[i]!)).toFixed(2)}`;
      say(
        `${name}: median of ${runs} runs: p99 ratio from the call ${median(0).toFixed(2)}× (${spread(0)}), from the return ${median(1).toFixed(2)}× (${spread(1)}); flood throughput ratio ${median(2).toFixed(2)} (${spread(2)})` +
          (separate ? `; the flood on a queue of its own: p99 ratio ${median(3).toFixed(2)}× (${spread(3)})` : ""),
      );
    }
  } finally {
    await db.dispose();
  }
}
