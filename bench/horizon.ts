/**
 * Sustained load with a held MVCC horizon (issue 27, item 5): jobs are
 * enqueued one at a time at a fixed offered rate for `--minutes`, drained by
 * one worker in the same process, while
 *   none:  nothing else runs;
 *   held:  another session holds a snapshot open the whole time
 *          (PostgreSQL `BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT
 *          txid_current();`, MariaDB `START TRANSACTION WITH CONSISTENT
 *          SNAPSHOT`), as a forgotten session or a long report does;
 *   scans: 4 sessions run REPEATABLE READ transactions that each scan the
 *          jobs table, back to back (PostgreSQL only).
 * Per minute: jobs started per second, start latency (enqueue returned →
 * handler start; 0 for a job started before its enqueue returned) p50/p99,
 * the enqueues' own p99 (call → returned), enqueues in flight, worker log
 * lines and claim floor changes, and docket.health() (dead rows of the jobs table,
 * or MariaDB's purge backlog; the oldest transaction's age), and the share
 * of the machine's CPU time its hypervisor took (steal, from /proc/stat: a
 * minute with much of it measured a starved machine, not docket). Each
 * scenario on a fresh store; ratios against `none` of the same run.
 *
 *   npx tsx bench/horizon.ts [--adapters postgres,mysql] [--minutes 2] [--rate 1000] [--scenarios none,held,scans] [--private-postgres] [--stalls 300]
 *
 * With --stalls MS, each second in which a job started MS or more after its
 * enqueue returned is printed (wall-clock time, slowest start, jobs started
 * and enqueues returned in that second), to set beside the server's log.
 *
 * With --private-postgres, PostgreSQL runs on a server this benchmark owns
 * (initdb on its own port, the defaults a production server starts with,
 * autovacuum on; fsync off as in the tests' private servers), not the
 * shared one (whose autovacuum may be off: then even `none` accumulates
 * every dead row).
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Docket } from "../src/client/docket.ts";
import type { AdapterName } from "./databases.ts";
import type { FloorEvent } from "../src/adapters/postgres/index.ts";

const { values: args } = parseArgs({
  options: {
    adapters: { type: "string", default: "postgres,mysql" },
    minutes: { type: "string", default: "2" },
    rate: { type: "string", default: "1000" },
    scenarios: { type: "string", default: "none,held,scans" },
    "private-postgres": { type: "boolean", default: false },
    stalls: { type: "string", default: "" },
  },
  strict: true,
});
const privatePg = args["private-postgres"] ? await (await import("../test/support/private-postgres.ts")).startPrivatePostgres() : null;
if (privatePg) process.env.DOCKET_PG_URL = privatePg.url;
// Read after DOCKET_PG_URL is set: databases.ts takes the URL when loaded.
const { openDatabase } = await import("./databases.ts");
const MINUTES = Number(args.minutes);
const RATE = Number(args.rate);
const TICK_MS = 10;
/**
 * Enqueues in flight at once, at most, as a producer process with bounded
 * concurrency has: a job due while this many wait is sent when one returns
 * (the producer is then behind, and says by how much). Unbounded, a producer
 * that fell behind queued tens of thousands of calls on its pool, and that
 * queue alone kept it behind (run I, bench/results/session48.txt).
 */
const MAX_IN_FLIGHT = 64;
const STALL_MS = args.stalls === "" ? null : Number(args.stalls);
type Scenario = "none" | "held" | "scans";

interface Minute {
  started: number;
  p50: number;
  p99: number;
  dead: number | null;
  backlog: number | null;
  oldestS: number | null;
  /** Enqueues called and not yet returned at the minute's end (the producer's own backlog). */
  inFlight: number;
  /** Jobs due by the minute's end and not yet sent (the producer behind the offered rate). */
  owed: number;
  /** p99 of enqueue call → returned, of the jobs started in the minute. */
  enqueueP99: number;
  /** Worker log lines (warnings and errors) in the minute. */
  warnings: number;
  /** Claim floor changes in the minute (on, lowered, off). */
  floor: string;
  /** Share of the machine's CPU time the hypervisor took (steal) in the minute, or null where /proc/stat is not readable. */
  steal: number | null;
}

/** The machine's CPU time so far from /proc/stat (all and stolen, in ticks), or null off Linux. */
function cpuTicks(): { total: number; steal: number } | null {
  try {
    const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
    return { total: fields.reduce((a, b) => a + b, 0), steal: fields[7] ?? 0 };
  } catch {
    return null;
  }
}

const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

/** A session outside docket that holds a horizon back: one open snapshot, or `scanners` scanning loops. */
async function holder(system: AdapterName, url: string, jobs: string, scenario: Scenario): Promise<() => Promise<void>> {
  if (scenario === "none") return async () => undefined;
  if (system === "postgres") {
    const pg = (await import("pg")).default;
    if (scenario === "held") {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
      await c.query("SELECT txid_current()");
      return async () => void (await c.query("ROLLBACK"), await c.end());
    }
    let on = true;
    const loops = Array.from({ length: 4 }, async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      while (on) {
        await c.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
        await c.query(`SELECT count(*) FROM ${jobs}`);
        await c.query("COMMIT");
      }
      await c.end();
    });
    return async () => void ((on = false), await Promise.all(loops));
  }
  const mysql = (await import("mysql2/promise")).default;
  const c = await mysql.createConnection({ uri: url });
  await c.query("START TRANSACTION WITH CONSISTENT SNAPSHOT");
  await c.query(`SELECT count(*) FROM ${jobs}`);
  return async () => void (await c.query("ROLLBACK"), await c.end());
}

const floorText = (f: { on: number; lowered: number; off: number; slowestCheck: number }) =>
  f.on + f.lowered + f.off === 0 ? "–" : `on ${f.on}, lowered ${f.lowered}, off ${f.off}, slowest check ${f.slowestCheck.toFixed(0)} ms`;

/** A scenario's run: its minutes, and start latency over every job started after the first minute, and over the whole run. */
interface Run {
  minutes: Minute[];
  p50: number;
  p99: number;
  enqueueP99: number;
  wholeP50: number;
  wholeP99: number;
}

async function run(system: AdapterName, n: number, scenario: Scenario): Promise<Run> {
  const db = await openDatabase(system);
  try {
    const t0 = performance.now();
    const minuteOf = (t: number) => Math.min(MINUTES - 1, Math.floor((t - t0) / 60_000));
    const floorEvents = Array.from({ length: MINUTES }, () => ({ on: 0, lowered: 0, off: 0, slowestCheck: 0 }));
    const observe = (e: FloorEvent) => {
      const m = floorEvents[minuteOf(performance.now())]!;
      m[e.change]++;
      m.slowestCheck = Math.max(m.slowestCheck, e.checkMs ?? 0);
    };
    const warnings = Array.from({ length: MINUTES }, () => 0);
    const messages = new Map<string, number>();
    const log = (message: string) => {
      warnings[minuteOf(performance.now())]!++;
      const key = message.slice(0, 160);
      messages.set(key, (messages.get(key) ?? 0) + 1);
    };
    const adapter = await db.open(n, { instrument: { claimFloor: { observe } } });
    // The producer has its own pool, as another process would: enqueues that fall behind queue on it, not ahead of the worker's claims.
    const producerAdapter = await db.open(n);
    let enqueueErrors = 0;
    const docket = new Docket({ adapter });
    const producer = new Docket({ adapter: producerAdapter });
    await docket.migrate();
    const spec = db.spec(n);
    const latencies: number[][] = Array.from({ length: MINUTES }, () => []);
    const enqueueLatencies: number[][] = Array.from({ length: MINUTES }, () => []);
    // When each job's enqueue returned (deleted when the job starts).
    const returned = new Map<number, number>();
    // Per second since t0, for --stalls: jobs started, their slowest start, enqueues returned.
    const seconds: { started: number; slowest: number; enqueued: number }[] = [];
    const second = (t: number) => (seconds[Math.floor((t - t0) / 1000)] ??= { started: 0, slowest: 0, enqueued: 0 });
    const worker = docket.worker({
      concurrency: 10,
      logger: { warn: log, error: log },
      handlers: {
        t: (payload, job) => {
          const now = performance.now();
          const m = minuteOf(now);
          const back = returned.get(job.job.id);
          returned.delete(job.job.id);
          // Started before its enqueue returned: no wait after it.
          const latency = back === undefined ? 0 : now - back;
          latencies[m]!.push(latency);
          if (STALL_MS !== null) {
            const s = second(now);
            s.started++;
            s.slowest = Math.max(s.slowest, latency);
          }
          enqueueLatencies[m]!.push((back ?? now) - (payload as { at: number }).at);
        },
      },
    });
    await worker.start();
    const release = await holder(system, spec.location, `${spec.prefix}jobs`, scenario);
    const minutes: Minute[] = [];
    let sent = 0;
    const end = t0 + MINUTES * 60_000;
    let nextMinute = t0 + 60_000;
    const inFlight = new Set<Promise<unknown>>();
    let ticks = cpuTicks();
    const stealSince = () => {
      const now = cpuTicks();
      const share = ticks && now && now.total > ticks.total ? (now.steal - ticks.steal) / (now.total - ticks.total) : null;
      ticks = now;
      return share;
    };
    const minuteRow = (m: number, h: Awaited<ReturnType<typeof docket.health>>, waiting: number): Minute => ({
      started: latencies[m]!.length / 60,
      p50: pct(latencies[m]!, 50),
      p99: pct(latencies[m]!, 99),
      dead: h?.deadRows?.find((r) => r.table === `${spec.prefix}jobs`)?.dead ?? null,
      backlog: h?.purgeBacklog ?? null,
      oldestS: h && h.oldestTransactionAgeMs !== null ? h.oldestTransactionAgeMs / 1000 : null,
      inFlight: waiting,
      owed: Math.max(0, Math.floor(((Math.min(performance.now(), end) - t0) / 1000) * RATE) - sent),
      enqueueP99: pct(enqueueLatencies[m]!, 99),
      warnings: warnings[m]!,
      floor: floorText(floorEvents[m]!),
      steal: stealSince(),
    });
    while (performance.now() < end) {
      const due = Math.floor(((performance.now() - t0) / 1000) * RATE);
      for (; sent < due && inFlight.size < MAX_IN_FLIGHT; sent++) {
        const p = producer
          .enqueue("t", { at: performance.now() })
          .then((job) => {
            const now = performance.now();
            returned.set(job.id, now);
            if (STALL_MS !== null) second(now).enqueued++;
          })
          .catch(() => void enqueueErrors++)
          .finally(() => inFlight.delete(p));
        inFlight.add(p);
      }
      if (performance.now() >= nextMinute) {
        const m = minuteOf(nextMinute - 1);
        const h = await docket.health();
        minutes.push(minuteRow(m, h, inFlight.size));
        nextMinute += 60_000;
      }
      await new Promise((r) => setTimeout(r, TICK_MS));
    }
    // Enqueues in flight at the period's end: waited for 30 s at most. Jobs owed then are not sent.
    await Promise.race([Promise.all(inFlight), new Promise((r) => setTimeout(r, 30_000))]);
    const leftover = inFlight.size;
    const h = await docket.health();
    minutes.push(minuteRow(MINUTES - 1, h, leftover));
    if (STALL_MS !== null) {
      const wall = Date.now() - performance.now();
      seconds.forEach((s, i) => {
        if (s && s.slowest >= STALL_MS) console.log(`${system} ${scenario} stall: ${new Date(wall + t0 + i * 1000).toISOString()} (second ${i}) slowest start ${s.slowest.toFixed(0)} ms, ${s.started} started, ${s.enqueued} enqueues returned`);
      });
    }
    for (const [message, count] of messages) console.log(`${system} ${scenario}: worker log ×${count}: ${message}`);
    if (leftover > 0 || enqueueErrors > 0) console.log(`${system} ${scenario}: ${leftover} enqueues not returned 30 s after the period (dropped), ${enqueueErrors} failed`);
    await release();
    await worker.stop();
    await producerAdapter.close().catch(() => undefined);
    await adapter.close();
    // After the first minute (the store's and the holder's start); every minute when the run is one minute long.
    const after = MINUTES > 1 ? 1 : 0;
    const all = latencies.slice(after).flat();
    const enqueues = enqueueLatencies.slice(after).flat();
    const whole = latencies.flat();
    return { minutes: minutes.slice(0, MINUTES), p50: pct(all, 50), p99: pct(all, 99), enqueueP99: pct(enqueues, 99), wholeP50: pct(whole, 50), wholeP99: pct(whole, 99) };
  } finally {
    await db.dispose();
  }
}

console.log(`horizon benchmark: ${RATE} jobs/s offered (one enqueue each), one worker × 10, ${MINUTES} min per scenario; node ${process.version}, ${new Date().toISOString()}`);
for (const system of args.adapters.split(",") as AdapterName[]) {
  const scenarios = (args.scenarios.split(",") as Scenario[]).filter((s) => system === "postgres" || s !== "scans");
  const results = new Map<Scenario, Run>();
  // Each scenario's table as soon as it ends (a long run cut short keeps what it measured).
  for (const [i, scenario] of scenarios.entries()) {
    const r = await run(system, i + 1, scenario);
    results.set(scenario, r);
    console.log(`\n${system} ${scenario} (${new Date().toISOString()})`);
    console.log("| scenario | minute | started jobs/s | start p50 ms | start p99 ms | dead rows (jobs) | purge backlog | oldest transaction s | enqueues in flight | enqueues owed | enqueue p99 ms | worker warnings | claim floor | CPU steal |");
    console.log("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    r.minutes.forEach((m, k) =>
      console.log(
        `| ${scenario} | ${k + 1} | ${m.started.toFixed(0)} | ${m.p50.toFixed(1)} | ${m.p99.toFixed(1)} | ${m.dead ?? "–"} | ${m.backlog ?? "–"} | ${m.oldestS === null ? "–" : m.oldestS.toFixed(1)} | ${m.inFlight} | ${m.owed} | ${m.enqueueP99.toFixed(1)} | ${m.warnings} | ${m.floor} | ${m.steal === null ? "–" : `${(m.steal * 100).toFixed(0)}%`} |`,
      ),
    );
  }
  console.log("");
  for (const [scenario, r] of results) {
    const later = r.minutes.slice(MINUTES > 1 ? 1 : 0);
    const rate = later.reduce((x, m) => x + m.started, 0) / later.length;
    console.log(`${system} ${scenario}, minutes ${MINUTES > 1 ? 2 : 1}-${MINUTES} (every job started): ${rate.toFixed(0)} jobs/s, start p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms; enqueue p99 ${r.enqueueP99.toFixed(1)} ms`);
  }
  const base = results.get("none");
  if (base) {
    for (const [scenario, r] of results) {
      if (scenario === "none") continue;
      const k = r.minutes.length - 1;
      const [m, b] = [r.minutes[k]!, base.minutes[k]!];
      console.log(`${system} ${scenario} / none, last minute: throughput ${(m.started / b.started).toFixed(2)}, p50 ${(m.p50 / b.p50).toFixed(2)}×, p99 ${(m.p99 / b.p99).toFixed(2)}×`);
      console.log(`${system} ${scenario} / none, minutes ${MINUTES > 1 ? 2 : 1}-${MINUTES}: p50 ${(r.p50 / base.p50).toFixed(2)}×, p99 ${(r.p99 / base.p99).toFixed(2)}×`);
      const total = (x: Run) => x.minutes.reduce((a, m) => a + m.started, 0);
      console.log(
        `${system} ${scenario} / none, the whole run (minutes 1-${MINUTES}, every job started): throughput ${(total(r) / total(base)).toFixed(2)}, ` +
          `p50 ${r.wholeP50.toFixed(1)} / ${base.wholeP50.toFixed(1)} ms = ${(r.wholeP50 / base.wholeP50).toFixed(2)}×, p99 ${r.wholeP99.toFixed(1)} / ${base.wholeP99.toFixed(1)} ms = ${(r.wholeP99 / base.wholeP99).toFixed(2)}×, ` +
          `minutes with p99 over 2× none's: ${r.minutes.filter((m, k) => m.p99 > 2 * base.minutes[k]!.p99).length} of ${MINUTES}`,
      );
    }
  }
}
if (privatePg) {
  const settings = await (async () => {
    const pg = (await import("pg")).default;
    const c = new pg.Client({ connectionString: privatePg.url });
    await c.connect();
    const r = await c.query("select name, setting from pg_settings where name in ('autovacuum', 'autovacuum_naptime', 'server_version')");
    await c.end();
    return r.rows.map((x: { name: string; setting: string }) => `${x.name}=${x.setting}`).join(", ");
  })();
  console.log(`(private PostgreSQL server: ${settings})`);
  await privatePg.destroy();
}
