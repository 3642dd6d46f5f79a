import { performance } from "node:perf_hooks";
import { afterAll, describe, expect, it } from "vitest";
import { mysqlAdapter } from "../../src/adapters/mysql/index.ts";
import { Docket, type WorkerEvent } from "../../src/index.ts";
import { conformanceCases, runCase, unmetNeeds, type AdapterTarget, type ConformanceCase, type TestStore } from "../../src/testing/index.ts";
import { startPrivateGalera, type GaleraNode } from "../support/private-galera.ts";
import { until } from "../support/until.ts";

/**
 * docket on a 3-node MariaDB Galera Cluster this file starts (see
 * private-galera.ts): the portable conformance kit with each case's sessions
 * on different nodes, and a multi-node stress run (one worker per node, keys
 * and a queue cap) without and with a node SIGKILLed and rejoining.
 */
const mysql = (await import("mysql2/promise")).default;
const what = "docket on a MariaDB Galera cluster";
const started = Date.now();
// About 5 minutes (3 nodes on 2 cores): run when asked (DOCKET_GALERA=1), as .ci/run does in a step of its own,
// not by every `npm test`. docs/design.md "Galera: guards written, not only locked" says what it shows.
const asked = process.env.DOCKET_GALERA === "1";
if (!asked) console.warn(`\n${"!".repeat(78)}\n!! SKIPPING ${what}: about 5 min; DOCKET_GALERA=1 runs it (.ci/run does)\n${"!".repeat(78)}\n`);
const cluster = asked ? await startPrivateGalera(what) : null;
const NODES: readonly GaleraNode[] = [1, 2, 3];
const database = `docket_galera_${process.pid.toString(36)}${Date.now().toString(36)}`;
let admin: import("mysql2/promise").Pool | null = null;
if (cluster) {
  console.log(`galera: 3 nodes Synced in ${Date.now() - started} ms`);
  const root = await mysql.createConnection({ uri: cluster.url(1) });
  await root.query(`CREATE DATABASE ${database}`);
  await root.end();
  // The DDL replicates in total order, and is applied on the other nodes a moment later.
  for (const n of NODES) {
    const c = await mysql.createConnection({ uri: cluster.url(n) });
    await until(async () => ((await c.query(`SHOW DATABASES LIKE '${database}'`))[0] as unknown[]).length === 1, 10_000, `database on node ${n}`);
    await c.end();
  }
  admin = mysql.createPool({ uri: cluster.url(1, database), connectionLimit: 2 });
}
const url = (n: GaleraNode) => cluster!.url(n, database);

afterAll(async () => {
  await admin?.end();
  await cluster?.destroy();
});

let stores = 0;
let sessions = 0;
/** Each `connect()` goes to the next node, so the sessions of one case land on different nodes; `execute` runs on node 1. */
const target: AdapterTarget = {
  name: "mysql on a 3-node Galera cluster",
  provides: ["sql"],
  async open(): Promise<TestStore> {
    const tablePrefix = `g${(stores++).toString(36)}_`;
    return {
      tablePrefix,
      location: url(1),
      connect: async (o?: { tablePrefix?: string }) => mysqlAdapter({ uri: url(NODES[sessions++ % NODES.length]!), tablePrefix, connectionLimit: 4, ...o }),
      // Causal (wsrep_sync_wait 7: reads, updates, deletes, inserts): the case's rows may have been written on another node.
      execute: async (sql) => {
        const c = await admin!.getConnection();
        try {
          await c.query("SET SESSION wsrep_sync_wait = 7");
          await c.query(sql.replaceAll("{jobs}", `${tablePrefix}jobs`));
        } finally {
          c.release();
        }
      },
      close: async () => undefined,
    };
  },
};

describe.skipIf(!cluster)(target.name, () => {
  const tally = { ran: 0, failed: [] as string[], started: 0 };
  const counted = async (c: ConformanceCase, timeoutMs: number) => {
    tally.started ||= Date.now();
    tally.ran++;
    // vitest's timeout fails the case without reaching the catch below: read the nodes' state before it fires.
    const watchdog = setTimeout(() => {
      void clusterState().then((s) => console.error(`galera: ${c.name} still running after ${(timeoutMs - WATCHDOG_LEAD_MS) / 1000} s; what each node is doing:\n${s}`));
    }, timeoutMs - WATCHDOG_LEAD_MS);
    try {
      await runCase(target, c);
    } catch (error) {
      tally.failed.push(c.name);
      console.error(`galera: ${c.name} failed; what each node was doing:\n${await clusterState()}`);
      throw error;
    } finally {
      clearTimeout(watchdog);
    }
  };
  afterAll(() => {
    if (tally.ran === 0) return;
    console.log(`galera conformance: ${tally.ran} tries, ${tally.failed.length} failed (${tally.failed.join(" | ") || "none"}), ${((Date.now() - tally.started) / 1000).toFixed(0)} s`);
  });
  for (const c of conformanceCases()) {
    const unmet = unmetNeeds(target, c);
    if (unmet.length > 0) it.skip(`${c.name} [skipped: needs ${unmet.join(", ")}]`, () => undefined);
    // Retried once: CI saw one case time out (concurrent purgers on three nodes) and the next case with it, once in
    // many runs, never reproduced here; a failure prints what each node was doing (clusterState), and both tries count.
    else {
      const timeout = c.timeoutMs ?? (c.slow ? 60_000 : 20_000);
      it(c.name, { timeout, retry: 1 }, () => counted(c, timeout));
    }
  }
});

/** How long before a case's timeout its watchdog reads the nodes' state (clusterState takes up to ~1 s per node). */
const WATCHDOG_LEAD_MS = 4_000;

/** For a failed case: each node's sessions (SHOW FULL PROCESSLIST), its wsrep flow-control figures and the last lines of its error log. */
async function clusterState(): Promise<string> {
  const out: string[] = [];
  for (const n of NODES) {
    out.push(`-- node ${n}`);
    try {
      const c = await mysql.createConnection({ uri: cluster!.url(n), connectTimeout: 5_000 });
      try {
        const [list] = await c.query("SHOW FULL PROCESSLIST");
        for (const p of list as { Id: number; Command: string; Time: number; State: string | null; Info: string | null }[]) {
          if (p.Command !== "Sleep") out.push(`  ${p.Id} ${p.Command} ${p.Time}s ${p.State ?? ""} ${(p.Info ?? "").slice(0, 200)}`);
        }
        const [status] = await c.query("SHOW STATUS WHERE Variable_name IN ('wsrep_local_state_comment', 'wsrep_flow_control_paused', 'wsrep_local_recv_queue', 'wsrep_local_send_queue', 'wsrep_local_bf_aborts', 'wsrep_local_cert_failures')");
        out.push(`  ${(status as { Variable_name: string; Value: string }[]).map((r) => `${r.Variable_name}=${r.Value}`).join(" ")}`);
      } finally {
        await c.end();
      }
    } catch (error) {
      out.push(`  (no answer: ${String(error)})`);
    }
    out.push(cluster!.log(n).split("\n").slice(-15).join("\n"));
  }
  return out.join("\n");
}

/** Concurrency keys of the stress jobs, with their limits. */
const KEYS = [
  { key: "k0", limit: 1 },
  { key: "k1", limit: 1 },
  { key: "k2", limit: 2 },
  { key: "k3", limit: 2 },
  { key: "k4", limit: 1 },
] as const;
const CAPPED = "capped";
const CAP = 2;
const JOBS = 600;
/** Jobs enqueued once the killed node rejoined, in a queue only its worker takes. */
const REJOINED = "rejoined";
const REJOIN_JOBS = 10;

type Tasks = { "stress.job": { n: number } };
interface Run {
  id: number;
  key: string | null;
  queue: string;
  start: number;
  end: number;
  node: GaleraNode;
}

/** The most intervals open at once; at equal times an end is swept before a start (they did not overlap). */
function deepest(runs: readonly Run[]): number {
  const edges = runs.flatMap((r) => [[r.start, 1] as const, [r.end, -1] as const]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let most = 0;
  for (const [, d] of edges) most = Math.max(most, (open += d));
  return most;
}

/** An error's kind: the operation, the driver's errno (or code) under docket's wrapper, and the message's first line. */
function kind(operation: string, error: unknown): string {
  const e = error as { errno?: number; code?: string; message?: string; cause?: { errno?: number; code?: string } };
  const id = e.cause?.errno ?? e.cause?.code ?? e.errno ?? e.code ?? "-";
  return `${operation} [${id}] ${String(e.message ?? e).split("\n")[0]!.slice(0, 160)}`;
}

const count = <K>(m: Map<K, number>, k: K) => m.set(k, (m.get(k) ?? 0) + 1);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface StressResult {
  ms: number;
  runs: Run[];
  /** Worker events by type. */
  events: Map<string, number>;
  /** Worker `error` events, with the worker's node and when (performance.now()). */
  errors: { node: GaleraNode; at: number; kind: string }[];
  /** Enqueues that threw, by kind (those jobs do not exist). */
  enqueueErrors: Map<string, number>;
  succeededEvents: Map<number, number>;
  /** Jobs enqueued (whose enqueue returned). */
  enqueued: number;
  /** When the killed node was Synced again (performance.now()), if one was killed. */
  rejoinedAt: number | null;
  rows: { id: number; state: string; attempt: number; last_error: string | null; errors: string | null }[];
}

/**
 * JOBS jobs (half in the capped queue, two thirds with a key) enqueued through
 * the nodes in turn, run by 3 workers (one per node, concurrency 4), until
 * every job is finished or `deadlineMs` passes. Handlers record when they ran
 * (their interval lies inside the one in which the database counted the job
 * running). With `kill`, everything is enqueued first; once a quarter of the
 * jobs succeeded, that node is SIGKILLed and restarted a second later, and
 * once it rejoined, REJOIN_JOBS more jobs go to a queue only its worker takes.
 */
async function stress(tablePrefix: string, deadlineMs: number, kill?: GaleraNode): Promise<StressResult> {
  const dockets = NODES.map((n) => new Docket<Tasks>({ adapter: mysqlAdapter({ uri: url(n), tablePrefix, connectionLimit: 6 }) }));
  const runs: Run[] = [];
  const events = new Map<string, number>();
  const errors: StressResult["errors"] = [];
  const succeededEvents = new Map<number, number>();
  const enqueueErrors = new Map<string, number>();
  try {
    await dockets[0]!.migrate();
    await dockets[0]!.setQueueCap(CAPPED, CAP);
    const workers = NODES.map((node, i) =>
      dockets[i]!.worker({
        name: `node${node}`,
        queues: node === kill ? [CAPPED, "open", REJOINED] : [CAPPED, "open"],
        concurrency: 4,
        pollMs: 50,
        leaseMs: 5_000,
        logger: null,
        handlers: {
          "stress.job": async (_payload, ctx) => {
            const start = performance.now();
            await sleep(5 + (ctx.job.id % 11));
            runs.push({ id: ctx.job.id, key: ctx.job.concurrencyKey, queue: ctx.job.queue, start, end: performance.now(), node });
          },
        },
        onEvent: (e: WorkerEvent) => {
          count(events, e.type);
          if (e.type === "error") errors.push({ node, at: performance.now(), kind: kind(e.operation, e.error) });
          if (e.type === "succeeded") count(succeededEvents, e.job.id);
        },
      }),
    );
    const t0 = performance.now();
    let enqueued = 0;
    const settled = (job: Promise<unknown>) =>
      job.then(
        () => void enqueued++,
        (error: unknown) => void count(enqueueErrors, kind("enqueue", error)),
      );
    const enqueue = (i: number) => {
      const k = i % 3 === 2 ? null : KEYS[(i * 7) % KEYS.length]!;
      return settled(dockets[i % NODES.length]!.enqueue("stress.job", { n: i }, { queue: i % 2 === 0 ? CAPPED : "open", ...(k ? { concurrency: k } : {}) }));
    };
    // One producer per node, each enqueueing its share in turn: admissions on different nodes race each other and the
    // workers. A failed enqueue is counted, not retried (the application would have seen it fail).
    const produce = () =>
      Promise.all(
        NODES.map(async (_, p) => {
          for (let i = p; i < JOBS; i += NODES.length) await enqueue(i);
        }),
      );
    if (kill === undefined) {
      for (const w of workers) await w.start();
      await produce();
    } else {
      await produce();
      for (const w of workers) await w.start();
    }
    const succeeded = async () => Number(((await admin!.query(`SELECT count(*) AS n FROM ${tablePrefix}jobs WHERE state = 'succeeded'`))[0] as { n: number }[])[0]!.n);
    let rejoinedAt: number | null = null;
    let rejoined = kill === undefined;
    let rejoin: Promise<void> = Promise.resolve();
    if (kill !== undefined) {
      while ((await succeeded()) < JOBS / 4) await sleep(50);
      await cluster!.kill(kill);
      console.log(`galera: node ${kill} killed with ${await succeeded()} of ${JOBS} jobs succeeded`);
      rejoin = sleep(1_000)
        .then(() => cluster!.restart(kill))
        .then(async () => {
          rejoinedAt = performance.now();
          for (let i = 0; i < REJOIN_JOBS; i++) await settled(dockets[0]!.enqueue("stress.job", { n: JOBS + i }, { queue: REJOINED }));
        })
        .finally(() => (rejoined = true));
      // Awaited below: a failed restart fails the test, after the workers stopped.
      rejoin.catch(() => undefined);
    }
    const end = Date.now() + deadlineMs;
    while (!(rejoined && (await succeeded()) >= enqueued) && Date.now() < end) await sleep(100);
    const ms = performance.now() - t0;
    await Promise.all(workers.map((w) => w.stop()));
    await rejoin;
    const read = await mysql.createConnection({ uri: url(1) });
    // Causal read: node 1 has applied every write the cluster committed before it.
    await read.query("SET SESSION wsrep_sync_wait = 1");
    const [rows] = await read.query(`SELECT id, state, attempt, last_error, errors FROM ${tablePrefix}jobs ORDER BY id`);
    await read.end();
    return { ms, runs, events, errors, enqueueErrors, succeededEvents, enqueued, rejoinedAt, rows: rows as StressResult["rows"] };
  } finally {
    for (const d of dockets) await d.close().catch(() => undefined);
  }
}

/** Key and cap overs (most runs at once beyond the limit), jobs run more than once, double successes; prints a one-line summary. */
function analyse(part: string, r: StressResult, killed?: GaleraNode) {
  const keyOvers = KEYS.flatMap(({ key, limit }) => {
    const most = deepest(r.runs.filter((x) => x.key === key));
    return most > limit ? [`${key}: ${most} at once (limit ${limit})`] : [];
  });
  const capMost = deepest(r.runs.filter((x) => x.queue === CAPPED));
  const capOvers = capMost > CAP ? [`${CAPPED}: ${capMost} at once (cap ${CAP})`] : [];
  const perJob = new Map<number, number>();
  for (const x of r.runs) count(perJob, x.id);
  const ranTwice = [...perJob].filter(([, n]) => n > 1).map(([id, n]) => `${id}×${n}`);
  const doubleSuccesses = [...r.succeededEvents].filter(([, n]) => n > 1).map(([id]) => id);
  const states = new Map<string, number>();
  for (const row of r.rows) count(states, row.state);
  const withErrors = r.rows.filter((row) => row.last_error !== null || row.errors !== null).map((row) => `${row.id}: ${row.last_error ?? row.errors}`);
  const kinds = new Map<string, number>();
  for (const e of r.errors) count(kinds, e.kind);
  for (const [k, n] of r.enqueueErrors) kinds.set(k, n);
  const show = (m: Map<string, number>) => [...m].map(([k, n]) => `${k} ${n}`).join(", ");
  const byNode = NODES.map((n) => r.runs.filter((x) => x.node === n).length).join("/");
  const rejoin =
    killed === undefined || r.rejoinedAt === null
      ? ""
      : `; node ${killed}'s worker after the rejoin: ${r.runs.filter((x) => x.node === killed && x.start > r.rejoinedAt!).length} runs ` +
        `(${r.runs.filter((x) => x.queue === REJOINED).length} of the ${REJOIN_JOBS} jobs only it takes), ` +
        `${r.errors.filter((e) => e.node === killed && e.at > r.rejoinedAt!).length} error events`;
  console.log(
    `galera ${part}: ${r.rows.length} jobs (${show(states)}), ${r.runs.length} runs (by node ${byNode}), ${(r.ms / 1000).toFixed(1)} s, ` +
      `${(r.rows.length / (r.ms / 1000)).toFixed(0)} jobs/s; events: ${show(r.events)}; key overs ${keyOvers.length}, most running in the capped queue ${capMost} (cap ${CAP}), ` +
      `jobs run twice ${ranTwice.length}, jobs with an error recorded ${withErrors.length}${rejoin}; error events by kind: ${kinds.size === 0 ? "none" : [...kinds].map(([k, n]) => `${n}× ${k}`).join("; ")}`,
  );
  return { keyOvers, capOvers, ranTwice, doubleSuccesses, states, withErrors };
}

describe.skipIf(!cluster)("docket on Galera: one worker per node, keys and a queue cap", () => {
  // Soft expectations: a run reports every broken guarantee, not only the first.
  it("every job succeeds exactly once, no key or cap is exceeded, and certification conflicts never fail a job", async () => {
    const r = await stress("s_", 120_000);
    const a = analyse("stress", r);
    expect.soft(r.enqueueErrors).toEqual(new Map());
    // Every job that was enqueued exists and succeeded.
    expect.soft(r.rows.length).toBe(r.enqueued);
    expect.soft(a.states).toEqual(new Map([["succeeded", r.rows.length]]));
    expect.soft(a.ranTwice).toEqual([]);
    expect.soft(a.doubleSuccesses).toEqual([]);
    expect.soft(a.keyOvers).toEqual([]);
    expect.soft(a.capOvers).toEqual([]);
    expect.soft(a.withErrors).toEqual([]);
    expect.soft(r.events.get("retry") ?? 0).toBe(0);
    expect.soft(r.events.get("dead") ?? 0).toBe(0);
    // A repair means docket's own writes left a key with blocked jobs and free slots.
    expect.soft(r.events.get("keyRepaired") ?? 0).toBe(0);
  }, 180_000);

  it("a node SIGKILLed mid-run and rejoining: no job lost or succeeded twice, no key or cap exceeded", async () => {
    const r = await stress("k_", 150_000, 2);
    const a = analyse("kill", r, 2);
    // The killed node's worker carries on once its node is back: it alone takes these jobs.
    expect.soft(r.runs.filter((x) => x.queue === REJOINED && x.node === 2).length).toBe(REJOIN_JOBS);
    expect.soft(r.enqueueErrors).toEqual(new Map());
    // Every job that was enqueued exists and succeeded.
    expect.soft(r.rows.length).toBe(r.enqueued);
    expect.soft(a.states).toEqual(new Map([["succeeded", r.rows.length]]));
    expect.soft(a.doubleSuccesses).toEqual([]);
    expect.soft(a.keyOvers).toEqual([]);
    expect.soft(a.capOvers).toEqual([]);
    expect.soft(r.events.get("dead") ?? 0).toBe(0);
    expect.soft(r.events.get("keyRepaired") ?? 0).toBe(0);
  }, 240_000);
});
