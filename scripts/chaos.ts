/**
 * The chaos suite: docket's invariants under faults, with workers in
 * separate OS processes.
 *
 *   npm run chaos -- --adapter sqlite|postgres|mysql [--scenario kill|connections|restart|producer|all]
 *                    [--jobs 2000] [--short] [--seed N] [--galera]
 *
 * With `--galera` (mysql), the store is on a 3-node MariaDB Galera Cluster
 * the script starts (test/support/private-galera.ts): workers and producers
 * attach to the nodes in turn, `connections` kills every node's
 * connections, and `restart` SIGKILLs node 2 and starts it again (it
 * rejoins) instead of restarting a server.
 *
 * Scenarios (each on a fresh store):
 *  - kill:        4 workers; every 1–3 s one is SIGKILLed and a new one
 *                 spawned, while the jobs run: plain ones, keyed ones (30
 *                 keys, limits 1–3), a queue capped at 2, some failing once
 *                 and retried, some failing until dead. On SQLite this is
 *                 also "SIGKILL mid-write", and the file must pass
 *                 `PRAGMA integrity_check` at the end.
 *  - connections: (PostgreSQL, MariaDB) every 0.5–2 s every connection of
 *                 the workers is terminated by the server.
 *  - restart:     (PostgreSQL, MariaDB) a server this script starts on
 *                 another port (never the shared one) is restarted twice mid-run.
 *  - producer:    2 producers enqueue batches of 25 with enqueueMany and are
 *                 SIGKILLed every 0.2–0.8 s, often inside a call.
 *
 * Asserted and printed per scenario: every job terminal, none lost; none
 * succeeded twice (at most one succeeded event per job); no key or cap
 * exceeded in any snapshot of the live rows (every 100 ms); a job ran again
 * in the same attempt never, and in a later attempt only after a planned
 * failure, or (counted) after a kill of the process that ran it or its lost
 * lease, and then not before that lease could have expired;
 * no worker process exited but those killed; producer batches whole or
 * absent, and every returned batch whole. About 30% of the jobs are
 * workflow jobs: they record a durable step ("charge") and complete in
 * `ctx.transaction`, which writes one row to an application table; each
 * succeeded one must have exactly one row, any other none, and a recorded
 * step must never run in a later attempt. Exits 1 on any violation.
 *
 * Post-mortems: DOCKET_CHAOS_KEEP=1 keeps a run with violations (its store
 * and its workers' logs); DOCKET_CHAOS_AUDIT=1 (PostgreSQL) also records in
 * `<prefix>audit` every state change of a keyed job, with its transaction
 * id, backend pid and time.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Docket } from "../src/client/docket.ts";
import type { DocketAdapter } from "../src/core/adapter.ts";
import type { ChaosPayload, ChaosWorkerConfig } from "./chaos/worker.ts";

type AdapterName = "sqlite" | "postgres" | "mysql";
type Scenario = "kill" | "connections" | "restart" | "producer";
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const PG_URL = process.env.DOCKET_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const MYSQL_URL = process.env.DOCKET_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/mysql";
const QUEUES = ["alpha", "beta"];
const ALPHA_CAP = 2;
const KEYS = 30;
const LEASE_MS = 1500;

const { values: args } = parseArgs({
  options: {
    adapter: { type: "string" },
    scenario: { type: "string", default: "all" },
    jobs: { type: "string" },
    short: { type: "boolean", default: false },
    seed: { type: "string" },
    "timeout-s": { type: "string", default: "240" },
    galera: { type: "boolean", default: false },
  },
  strict: true,
});
const adapterName = args.adapter as AdapterName;
if (!["sqlite", "postgres", "mysql"].includes(adapterName)) {
  console.error("usage: npm run chaos -- --adapter <sqlite|postgres|mysql> [--scenario kill|connections|restart|producer|all] [--jobs N] [--short] [--seed N]");
  process.exit(2);
}
if (args.galera && adapterName !== "mysql") {
  console.error("chaos: --galera applies to --adapter mysql only");
  process.exit(2);
}
const SHORT = args.short;
const JOBS = Number(args.jobs ?? (SHORT ? 300 : 2000));
const TIMEOUT_MS = Number(args["timeout-s"]) * 1000;
const seed = args.seed !== undefined ? Number(args.seed) : Math.floor(Math.random() * 2 ** 31);
let state = seed >>> 0;
const random = () => {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const between = (a: number, b: number) => a + random() * (b - a);
/** `k` distinct numbers of 0..n-1, drawn with `random`. */
const pick = (n: number, k: number): number[] => {
  const all = Array.from({ length: n }, (_, i) => i);
  for (let i = 0; i < k; i++) {
    const j = i + Math.floor(random() * (n - i));
    [all[i], all[j]] = [all[j]!, all[i]!];
  }
  return all.slice(0, k).sort((a, b) => a - b);
};
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const applicable: Record<AdapterName, Scenario[]> = { sqlite: ["kill", "producer"], postgres: ["kill", "connections", "restart", "producer"], mysql: ["kill", "connections", "restart", "producer"] };
const scenarios = args.scenario === "all" ? applicable[adapterName] : [args.scenario as Scenario];
for (const s of scenarios) {
  if (!applicable[adapterName].includes(s)) {
    console.error(`chaos: scenario ${s} does not apply to ${adapterName} (${applicable[adapterName].join(", ")} do)`);
    process.exit(2);
  }
}

// ---------------------------------------------------------------- stores

interface Store {
  target: string;
  /** Where workers and producers attach, in turn (a Galera cluster's nodes); `target` alone otherwise. */
  targets?: string[];
  prefix: string;
  open(): Promise<DocketAdapter>;
  /** Terminates every connection of the store's database but the caller's own. */
  killConnections(): Promise<number>;
  restart?(): Promise<void>;
  dispose(): Promise<void>;
}

/** `url` with its database path replaced by `database`. */
function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

let stores = 0;
async function openStore(scenario: Scenario, dir: string): Promise<Store> {
  const prefix = `chaos${stores++}_`;
  if (adapterName === "sqlite") {
    const { sqliteAdapter } = await import("../src/adapters/sqlite/index.ts");
    const target = join(dir, `${prefix}.db`);
    return { target, prefix, open: async () => sqliteAdapter({ filename: target, tablePrefix: prefix, busyTimeoutMs: 30_000 }), killConnections: async () => 0, dispose: async () => undefined };
  }
  const database = `docket_chaos_${process.pid.toString(36)}_${stores}`;
  if (adapterName === "postgres") {
    const pg = (await import("pg")).default;
    const { postgresAdapter } = await import("../src/adapters/postgres/index.ts");
    const { startPrivatePostgres } = await import("../test/support/private-postgres.ts");
    const server = scenario === "restart" ? await startPrivatePostgres() : null;
    const root = server ? server.url : PG_URL;
    const admin = async (sql: string, url = root) => {
      const c = new pg.Client({ connectionString: url });
      c.on("error", () => undefined);
      await c.connect();
      try {
        return (await c.query(sql)).rowCount ?? 0;
      } finally {
        await c.end().catch(() => undefined);
      }
    };
    await admin(`CREATE DATABASE ${database}`);
    const target = withDatabase(root, database);
    return {
      target,
      prefix,
      open: async () => postgresAdapter({ connectionString: target, tablePrefix: prefix, max: 4 }),
      killConnections: () => admin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${database}' AND pid <> pg_backend_pid()`),
      restart: server ? () => server.restart() : undefined,
      dispose: async () => {
        await admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
        await server?.destroy();
      },
    };
  }
  const mysql = (await import("mysql2/promise")).default;
  const { mysqlAdapter } = await import("../src/adapters/mysql/index.ts");
  if (args.galera) return openGaleraStore(prefix);
  const { startPrivateMariadb } = await import("../test/support/private-mariadb.ts");
  const server = scenario === "restart" ? await startPrivateMariadb() : null;
  const root = server ? server.url : MYSQL_URL;
  const admin = async <T>(fn: (c: Awaited<ReturnType<typeof mysql.createConnection>>) => Promise<T>) => {
    const c = await mysql.createConnection({ uri: root });
    try {
      return await fn(c);
    } finally {
      await c.end().catch(() => undefined);
    }
  };
  await admin((c) => c.query(`CREATE DATABASE ${database}`));
  const target = withDatabase(root, database);
  return {
    target,
    prefix,
    open: async () => mysqlAdapter({ uri: target, tablePrefix: prefix, connectionLimit: 4 }),
    killConnections: () =>
      admin(async (c) => {
        const [rows] = (await c.query(`SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()`, [database])) as unknown as [{ id: number }[]];
        for (const r of rows) await c.query(`KILL ${Number(r.id)}`).catch(() => undefined);
        return rows.length;
      }),
    restart: server ? () => server.restart() : undefined,
    dispose: async () => {
      await admin((c) => c.query(`DROP DATABASE IF EXISTS ${database}`)).catch(() => undefined);
      await server?.destroy();
    },
  };
}

/** The cluster of a `--galera` run: started by the first store, stopped at exit. */
const galera: { cluster: import("../test/support/private-galera.ts").PrivateGalera | null } = { cluster: null };
const GALERA_NODES = [1, 2, 3] as const;

async function openGaleraStore(prefix: string): Promise<Store> {
  const mysql = (await import("mysql2/promise")).default;
  const { mysqlAdapter } = await import("../src/adapters/mysql/index.ts");
  const { startPrivateGalera } = await import("../test/support/private-galera.ts");
  galera.cluster ??= await startPrivateGalera("the chaos suite on Galera");
  const cluster = galera.cluster;
  if (cluster === null) throw new Error("chaos: --galera needs MariaDB with Galera (Debian's galera-4 and rsync)");
  const database = `docket_chaos_${process.pid}_${prefix.replace(/_$/, "")}`;
  const onNode = async <T>(node: 1 | 2 | 3, fn: (c: Awaited<ReturnType<typeof mysql.createConnection>>) => Promise<T>) => {
    const c = await mysql.createConnection({ uri: cluster.url(node) });
    try {
      return await fn(c);
    } finally {
      await c.end().catch(() => undefined);
    }
  };
  await onNode(1, (c) => c.query(`CREATE DATABASE ${database}`));
  // DDL replicates in total order; each node has the database once it applied it.
  for (const node of GALERA_NODES) {
    for (let i = 0; !(await onNode(node, async (c) => ((await c.query(`SHOW DATABASES LIKE '${database}'`))[0] as unknown[]).length === 1)); i++) {
      if (i > 100) throw new Error(`chaos: database ${database} never reached node ${node}`);
      await sleep(100);
    }
  }
  const targets = GALERA_NODES.map((node) => cluster.url(node, database));
  return {
    target: targets[0]!,
    targets,
    prefix,
    open: async () => mysqlAdapter({ uri: targets[0]!, tablePrefix: prefix, connectionLimit: 4 }),
    killConnections: async () => {
      let killed = 0;
      for (const node of GALERA_NODES) {
        killed += await onNode(node, async (c) => {
          const [rows] = (await c.query(`SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()`, [database])) as unknown as [{ id: number }[]];
          for (const r of rows) await c.query(`KILL ${Number(r.id)}`).catch(() => undefined);
          return rows.length;
        });
      }
      return killed;
    },
    restart: async () => {
      await cluster.kill(2);
      await sleep(500);
      await cluster.restart(2);
    },
    dispose: () => onNode(1, (c) => c.query(`DROP DATABASE IF EXISTS ${database}`)).then(() => undefined),
  };
}

// ---------------------------------------------------------------- processes

interface Child {
  proc: ChildProcess;
  killed: boolean;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function spawnChild(script: string, config: object): Promise<Child> {
  const proc = spawn(process.execPath, ["--import", "tsx", join(ROOT, "scripts", "chaos", script), JSON.stringify(config)], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    cwd: ROOT,
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => proc.once("exit", (code, signal) => r({ code, signal })));
  return new Promise((resolveReady, rejectReady) => {
    proc.once("message", () => resolveReady({ proc, killed: false, exited }));
    void exited.then((e) => rejectReady(new Error(`${script} exited before it was ready: ${JSON.stringify(e)}`)));
  });
}

// ---------------------------------------------------------------- scenarios

interface Report {
  adapter: AdapterName;
  scenario: Scenario;
  jobs: number;
  faults: number;
  reexecutions: { afterKill: number; afterLostLease: number; plannedRetries: number; afterFailedWrite?: number };
  lost: number;
  doubleSuccesses: number;
  crashes: number;
  keyOrCapExceeded: number;
  /** The workflow jobs (ctx.step, then ctx.transaction): effect rows, duplicates, step runs, and steps run again after they were recorded. */
  workflow?: { jobs: number; effects: number; duplicateEffects: number; stepRuns: number; stepRerunsAfterRecord: number };
  /** The dependency graph: children, edges, the largest fan-in, children started before their parents, doomed children cancelled, and doomed children that ran. */
  graph?: { children: number; edges: number; maxFanIn: number; releasedEarly: number; cancelledByParent: number; ranWhileDoomed: number };
  seconds: number;
  violations: string[];
}

async function workload(scenario: Scenario, store: Store, dir: string): Promise<Report> {
  const started = Date.now();
  const violations: string[] = [];
  const violation = (m: string) => {
    if (violations.length < 50) console.error(`VIOLATION (${scenario}): ${m}`);
    violations.push(m);
  };
  const adapter = await store.open();
  const docket = new Docket({ adapter });
  await docket.migrate();
  await docket.setQueueCap("alpha", ALPHA_CAP);
  const limits = new Map<string, number>();
  for (let k = 0; k < KEYS; k++) limits.set(`k${k}`, (k % 3) + 1);
  await effects(store, `CREATE TABLE ${store.prefix}effects (job_id integer NOT NULL, attempt integer NOT NULL)`);
  if (process.env.DOCKET_CHAOS_AUDIT === "1" && adapterName === "postgres") {
    // A trigger, not part of docket: it only appends to its own table.
    await effects(store, `CREATE TABLE ${store.prefix}audit (id bigint, key text, old text, new text, xid bigint, pid int, at timestamptz, txstart timestamptz)`);
    await effects(store, `CREATE FUNCTION ${store.prefix}audit_fn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO ${store.prefix}audit VALUES (NEW.id, NEW.concurrency_key, OLD.state, NEW.state, txid_current(), pg_backend_pid(), clock_timestamp(), transaction_timestamp()); RETURN NEW; END $$`);
    await effects(store, `CREATE TRIGGER ${store.prefix}audit_t AFTER UPDATE ON ${store.prefix}jobs FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.concurrency_key IS NOT NULL) EXECUTE FUNCTION ${store.prefix}audit_fn()`);
  }
  const plan = new Map<number, ChaosPayload & { dies: boolean; parents: number[] }>();
  // A graph (EnqueueOptions.after) in each batch of 200: half of its second hundred wait for 1–3 jobs of its first
  // hundred by ref, every 50th for 50 of them (fan-in 50); some of a first hundred wait for a job of the batch
  // before by id. Parents that die cancel their descendants.
  const idsOf: number[] = [];
  for (let i = 0; i < JOBS; i += 200) {
    const items = Array.from({ length: Math.min(200, JOBS - i) }, (_, k) => {
      const n = i + k;
      const r = random();
      const failFirst = r < 0.03 ? 9 : r < 0.11 ? 1 : 0;
      const keyed = random() < 0.6;
      const key = `k${Math.floor(random() * KEYS)}`;
      const payload: ChaosPayload = { n, failFirst, sleepMs: Math.floor(between(20, 200)), workflow: random() < 0.3 };
      const refs = k >= 100 && k % 50 === 0 ? pick(100, 50) : k >= 100 && random() < 0.5 ? pick(100, 1 + Math.floor(random() * 3)) : [];
      const ids = k < 100 && i > 0 && random() < 0.2 ? [idsOf[i - 200 + Math.floor(random() * 200)]!] : [];
      const after = [...refs.map((p) => ({ ref: `r${i + p}` })), ...ids];
      return {
        task: "chaos.job",
        payload,
        ref: `r${n}`,
        options: {
          queue: random() < 0.3 ? "alpha" : "beta",
          maxAttempts: failFirst === 9 ? 3 : 8,
          ...(keyed ? { concurrency: { key, limit: limits.get(key)! } } : {}),
          ...(after.length > 0 ? { after } : {}),
        },
      };
    });
    const stored = await docket.enqueueMany(items);
    for (const j of stored) idsOf.push(j.id);
    stored.forEach((j, k) => {
      const p = j.payload as ChaosPayload;
      const parents = (items[k]!.options.after ?? []).map((a) => (typeof a === "number" ? a : idsOf[Number(a.ref.slice(1))]!));
      plan.set(j.id, { ...p, dies: p.failFirst === 9, parents });
    });
  }
  const workers: Child[] = [];
  const killedAt = new Map<number, number>();
  let outIndex = 0;
  const spawnWorker = async () => {
    const target = store.targets ? store.targets[outIndex % store.targets.length]! : store.target;
    const config: ChaosWorkerConfig = { adapter: adapterName, target, tablePrefix: store.prefix, out: join(dir, `${scenario}-w${outIndex++}.ndjson`), queues: QUEUES, leaseMs: LEASE_MS };
    const child = await spawnChild("worker.ts", config);
    workers.push(child);
    void child.exited.then((e) => {
      if (!child.killed) violation(`worker pid ${child.proc.pid} exited on its own: ${JSON.stringify(e)}`);
    });
  };
  for (let i = 0; i < 4; i++) await spawnWorker();

  let done = false;
  let faults = 0;
  let keyOrCapExceeded = 0;
  const faultLoop = (async () => {
    let restarts = 0;
    while (!done) {
      if (scenario === "kill") {
        await sleep(between(SHORT ? 300 : 1000, SHORT ? 800 : 3000));
        if (done) break;
        const live = workers.filter((w) => !w.killed);
        const victim = live[Math.floor(random() * live.length)]!;
        victim.killed = true;
        killedAt.set(victim.proc.pid!, Date.now());
        victim.proc.kill("SIGKILL");
        faults++;
        await spawnWorker();
      } else if (scenario === "connections") {
        await sleep(between(500, 2000));
        if (done) break;
        await store.killConnections().catch((e) => console.error(`kill connections: ${String(e)}`));
        faults++;
      } else {
        await sleep(SHORT ? 1500 : 4000);
        if (done || restarts >= 2) continue;
        await store.restart!();
        restarts++;
        faults++;
      }
    }
  })();

  // Snapshots of the live rows: caps and key limits (I2, I3).
  const deadline = Date.now() + TIMEOUT_MS;
  let lastCounts = "";
  for (;;) {
    let rows: { state: string; queue: string; concurrencyKey: string | null }[];
    try {
      rows = [];
      for (let after = 0; ; ) {
        const page = await adapter.list({ limit: 10_000, afterId: after });
        rows.push(...page);
        if (page.length < 10_000) break;
        after = page[page.length - 1]!.id;
      }
    } catch {
      await sleep(100); // the server may be restarting
      continue;
    }
    const running = rows.filter((r) => r.state === "running" && r.queue === "alpha").length;
    if (running > ALPHA_CAP) (keyOrCapExceeded++, violation(`queue alpha has ${running} running, cap ${ALPHA_CAP}`));
    const admitted = new Map<string, number>();
    for (const r of rows) if (r.concurrencyKey && (r.state === "ready" || r.state === "running")) admitted.set(r.concurrencyKey, (admitted.get(r.concurrencyKey) ?? 0) + 1);
    for (const [k, n] of admitted) if (n > limits.get(k)!) (keyOrCapExceeded++, violation(`key ${k} has ${n} ready + running, limit ${limits.get(k)}`));
    const open = rows.filter((r) => r.state !== "succeeded" && r.state !== "dead" && r.state !== "cancelled").length;
    lastCounts = JSON.stringify(Object.fromEntries(["waiting", "scheduled", "ready", "blocked", "running", "succeeded", "dead", "cancelled"].map((s) => [s, rows.filter((r) => r.state === s).length])));
    if (open === 0 && rows.length === JOBS) break;
    if (Date.now() > deadline) {
      violation(`not finished after ${TIMEOUT_MS / 1000} s: ${lastCounts}`);
      break;
    }
    await sleep(100);
  }
  done = true;
  await faultLoop;
  for (const w of workers.filter((w) => !w.killed)) {
    w.killed = true; // from here on an exit is ours
    w.proc.send({ type: "stop" });
    const e = await Promise.race([w.exited, sleep(20_000).then(() => null)]);
    if (e === null) (violation(`worker pid ${w.proc.pid} did not stop within 20 s`), w.proc.kill("SIGKILL"));
    else if (e.code !== 0) violation(`worker pid ${w.proc.pid} stopped with ${JSON.stringify(e)}`);
  }

  // Final rows and the workers' records.
  const final = new Map((await docket.list({ limit: 10_000 })).map((j) => [j.id, j]));
  // A job is doomed when it dies or a parent is doomed: it must end cancelled, never run (its parents come first in id order).
  const doomed = new Set<number>();
  for (const [id, p] of [...plan].sort(([a], [b]) => a - b)) if (p.dies || p.parents.some((q) => doomed.has(q))) doomed.add(id);
  let lost = 0;
  for (const [id, p] of plan) {
    const j = final.get(id);
    const byParent = p.parents.some((q) => doomed.has(q));
    const expected = byParent ? "cancelled" : p.dies ? "dead" : "succeeded";
    if (!j || !["succeeded", "dead", "cancelled"].includes(j.state)) (lost++, violation(`job ${id} ended ${j?.state ?? "missing"}`));
    else if (j.state !== expected) violation(`job ${id} should be ${expected} (${byParent ? "an ancestor always fails" : p.dies ? "it always fails" : "its parents succeed"}), it is ${j.state}`);
  }
  const starts = new Map<number, { pid: number; t: number; attempt: number }[]>();
  const succeeded = new Map<number, number>();
  const lostBy = new Set<string>();
  const stepRuns = new Map<number, number[]>();
  /** Attempts whose failure was recorded (`${id}:${attempt}`): a workflow job's write may fail under connection faults. */
  const failed = new Set<string>();
  for (let i = 0; i < outIndex; i++) {
    const file = join(dir, `${scenario}-w${i}.ndjson`);
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, "utf8").split("\n")) {
      let r: { k: string; type?: string; id?: number; pid: number; t: number; attempt?: number };
      try {
        r = JSON.parse(line);
      } catch {
        continue; // empty, or the last line of a killed process
      }
      if (r.k === "stepRun") stepRuns.set(r.id!, [...(stepRuns.get(r.id!) ?? []), r.attempt!]);
      else if (r.k === "start") starts.set(r.id!, [...(starts.get(r.id!) ?? []), { pid: r.pid, t: r.t, attempt: r.attempt! }]);
      else if (r.k === "event" && r.type === "succeeded") succeeded.set(r.id!, (succeeded.get(r.id!) ?? 0) + 1);
      else if (r.k === "event" && r.type === "lost") lostBy.add(`${r.id}:${r.pid}`);
      else if (r.k === "event" && r.type === "retry") failed.add(`${r.id}:${r.attempt}`);
      else if (r.k === "event" && r.type === "keyRepaired") violation(`a worker repaired a stranded key: ${JSON.stringify(r)}`);
    }
  }
  const workflow = await checkWorkflow(store, plan, final, stepRuns, violation);
  const graph = checkGraph(plan, final, starts, doomed, violation);
  let doubleSuccesses = 0;
  for (const [id, n] of succeeded) if (n > 1) (doubleSuccesses++, violation(`job ${id}: ${n} succeeded events`));
  const reexecutions = { afterKill: 0, afterLostLease: 0, plannedRetries: 0, afterFailedWrite: 0 };
  for (const [id, list] of starts) {
    list.sort((a, b) => a.t - b.t || a.attempt - b.attempt);
    for (let i = 1; i < list.length; i++) {
      const prev = list[i - 1]!;
      const next = list[i]!;
      if (next.attempt <= prev.attempt) violation(`job ${id} ran twice in attempt ${next.attempt} (pids ${prev.pid}, ${next.pid})`);
      else if (prev.attempt <= plan.get(id)!.failFirst) reexecutions.plannedRetries++;
      // A workflow job's step or transaction failed (the connection was killed, the server restarted): retried as any failure.
      else if (plan.get(id)!.workflow && failed.has(`${id}:${prev.attempt}`)) reexecutions.afterFailedWrite++;
      // Otherwise the previous holder's lease must have expired first: a handler starts only with at least
      // LEASE_MS / 2 of its lease left (Executor.startBuffered), so the next start comes at least that much later.
      else if (next.t - prev.t < LEASE_MS / 2) violation(`job ${id} ran again ${next.t - prev.t} ms after attempt ${prev.attempt} started (pid ${prev.pid}), before its lease could expire`);
      else if ((killedAt.get(prev.pid) ?? -1) >= prev.t) reexecutions.afterKill++;
      else if (lostBy.has(`${id}:${prev.pid}`) || scenario !== "kill") reexecutions.afterLostLease++;
      else violation(`job ${id} ran again (attempt ${next.attempt}, pid ${next.pid}) after attempt ${prev.attempt} (pid ${prev.pid}) without a kill or a lost lease`);
    }
  }
  if (adapterName === "sqlite") {
    const { default: Database } = await import("better-sqlite3");
    const db = new Database(store.target, { readonly: true });
    const check = db.pragma("integrity_check", { simple: true });
    db.close();
    if (check !== "ok") violation(`PRAGMA integrity_check: ${String(check)}`);
  }
  await docket.close();
  const crashes = violations.filter((v) => v.includes("exited on its own")).length;
  return { adapter: adapterName, scenario, jobs: JOBS, faults, reexecutions, lost, doubleSuccesses, crashes, keyOrCapExceeded, workflow, graph, seconds: Math.round((Date.now() - started) / 1000), violations };
}

/**
 * The dependency checks (I15): every child of parents that all succeeded ran,
 * and its first attempt started only after the last of them finished (it was
 * never released early, nor stranded); a doomed child (an ancestor always
 * fails) never ran and ended cancelled, its reason naming a parent.
 */
function checkGraph(
  plan: Map<number, { parents: number[] }>,
  final: Map<number, { state: string; finishedAt: number | null; lastError: string | null; attempt: number }>,
  starts: Map<number, { t: number }[]>,
  doomed: Set<number>,
  violation: (m: string) => void,
): { children: number; edges: number; maxFanIn: number; releasedEarly: number; cancelledByParent: number; ranWhileDoomed: number } {
  let children = 0;
  let edges = 0;
  let maxFanIn = 0;
  let releasedEarly = 0;
  let cancelledByParent = 0;
  let ranWhileDoomed = 0;
  for (const [id, p] of plan) {
    if (p.parents.length === 0) continue;
    children++;
    edges += p.parents.length;
    maxFanIn = Math.max(maxFanIn, p.parents.length);
    const first = Math.min(...(starts.get(id) ?? []).map((s) => s.t));
    if (p.parents.some((q) => doomed.has(q))) {
      const j = final.get(id);
      if (Number.isFinite(first) || (j?.attempt ?? 0) > 0) {
        const parents = p.parents.map((q) => `${q}:${final.get(q)?.state}@${final.get(q)?.finishedAt}`).join(", ");
        (ranWhileDoomed++, violation(`child ${id} ran (first start ${first}, attempt ${j?.attempt}, now ${j?.state}: ${j?.lastError}) although an ancestor always fails; parents ${parents}`));
      }
      if (j?.state === "cancelled" && /parent job \d+ ended (dead|cancelled)/.test(j.lastError ?? "")) cancelledByParent++;
      else if (j?.state === "cancelled") violation(`child ${id} cancelled with reason ${JSON.stringify(j.lastError)}`);
      continue;
    }
    const ready = Math.max(...p.parents.map((q) => final.get(q)?.finishedAt ?? Infinity));
    if (first < ready) (releasedEarly++, violation(`child ${id} started at ${first}, before its last parent finished at ${ready}`));
  }
  return { children, edges, maxFanIn, releasedEarly, cancelledByParent, ranWhileDoomed };
}

/**
 * The workflow jobs' exactly-once checks: a succeeded one has exactly one
 * row in the effects table (written in `ctx.transaction`), any other none;
 * a job with no workflow has none; and step "charge", once recorded (its
 * result names the attempt whose function ran), never ran in a later attempt.
 */
async function checkWorkflow(
  store: Store,
  plan: Map<number, ChaosPayload & { dies: boolean }>,
  final: Map<number, { state: string; steps: { name: string; result: unknown }[] }>,
  stepRuns: Map<number, number[]>,
  violation: (m: string) => void,
): Promise<{ jobs: number; effects: number; duplicateEffects: number; stepRuns: number; stepRerunsAfterRecord: number }> {
  const rows = (await effects(store, `SELECT job_id FROM ${store.prefix}effects`)) as { job_id: number | string }[];
  const byJob = new Map<number, number>();
  for (const r of rows) byJob.set(Number(r.job_id), (byJob.get(Number(r.job_id)) ?? 0) + 1);
  let jobs = 0;
  let duplicateEffects = 0;
  let stepRerunsAfterRecord = 0;
  for (const [id, p] of plan) {
    const n = byJob.get(id) ?? 0;
    const j = final.get(id);
    if (!p.workflow) {
      if (n > 0) violation(`job ${id} has no workflow but ${n} effect rows`);
      continue;
    }
    jobs++;
    if (j?.state === "succeeded" && n !== 1) (n > 1 && duplicateEffects++, violation(`workflow job ${id} succeeded with ${n} effect rows`));
    if (j?.state !== "succeeded" && n !== 0) violation(`workflow job ${id} is ${j?.state} but has ${n} effect rows`);
    const recorded = j?.steps.find((s) => s.name === "charge")?.result as { attempt: number } | undefined;
    for (const attempt of recorded ? (stepRuns.get(id) ?? []) : []) {
      if (attempt > recorded!.attempt) (stepRerunsAfterRecord++, violation(`job ${id}: step "charge" recorded by attempt ${recorded!.attempt} ran again in attempt ${attempt}`));
    }
  }
  return { jobs, effects: rows.length, duplicateEffects, stepRuns: [...stepRuns.values()].reduce((a, l) => a + l.length, 0), stepRerunsAfterRecord };
}

/** Runs one statement on the store's database as the application would (its own connection), returning the rows. */
async function effects(store: Store, statement: string): Promise<unknown[]> {
  if (adapterName === "sqlite") {
    const { default: Database } = await import("better-sqlite3");
    const db = new Database(store.target);
    try {
      const s = db.prepare(statement);
      return s.reader ? s.all() : (s.run(), []);
    } finally {
      db.close();
    }
  }
  if (adapterName === "postgres") {
    const pg = (await import("pg")).default;
    const c = new pg.Client({ connectionString: store.target });
    c.on("error", () => undefined);
    await c.connect();
    try {
      return (await c.query(statement)).rows;
    } finally {
      await c.end().catch(() => undefined);
    }
  }
  const mysql = (await import("mysql2/promise")).default;
  const c = await mysql.createConnection({ uri: store.target });
  try {
    // On a Galera node, a causal read: it waits until the node applied what the cluster committed before it.
    if (store.targets) await c.query("SET SESSION wsrep_sync_wait = 1");
    const [rows] = await c.query(statement);
    return Array.isArray(rows) ? rows : [];
  } finally {
    await c.end().catch(() => undefined);
  }
}

async function producers(store: Store, dir: string): Promise<Report> {
  const started = Date.now();
  const violations: string[] = [];
  const violation = (m: string) => {
    if (violations.length < 50) console.error(`VIOLATION (producer): ${m}`);
    violations.push(m);
  };
  const adapter = await store.open();
  const docket = new Docket({ adapter });
  await docket.migrate();
  const SIZE = 25;
  let outIndex = 0;
  const live: Child[] = [];
  let crashes = 0;
  const spawnProducer = async () => {
    const target = store.targets ? store.targets[outIndex % store.targets.length]! : store.target;
    const child = await spawnChild("producer.ts", { adapter: adapterName, target, tablePrefix: store.prefix, out: join(dir, `producer-${outIndex++}.log`), size: SIZE });
    live.push(child);
    void child.exited.then((e) => {
      if (!child.killed) (crashes++, violation(`producer pid ${child.proc.pid} exited on its own: ${JSON.stringify(e)}`));
    });
  };
  await spawnProducer();
  await spawnProducer();
  let faults = 0;
  const until = Date.now() + (SHORT ? 4_000 : 12_000);
  while (Date.now() < until) {
    await sleep(between(200, 800));
    const i = Math.floor(random() * live.length);
    const victim = live.splice(i, 1)[0]!;
    victim.killed = true;
    victim.proc.kill("SIGKILL");
    faults++;
    await spawnProducer();
  }
  for (const c of live) (c.killed = true, c.proc.kill("SIGKILL"));
  await Promise.all(live.map((c) => c.exited));
  const counts = new Map<string, number>();
  for (let after = 0; ; ) {
    const page = await docket.list({ limit: 10_000, afterId: after, queue: "produced" });
    for (const j of page) {
      const b = (j.payload as { batch: string }).batch;
      counts.set(b, (counts.get(b) ?? 0) + 1);
    }
    if (page.length < 10_000) break;
    after = page[page.length - 1]!.id;
  }
  for (const [b, n] of counts) if (n !== SIZE) violation(`batch ${b} is partial: ${n} of ${SIZE} jobs`);
  let returned = 0;
  for (let i = 0; i < outIndex; i++) {
    const file = join(dir, `producer-${i}.log`);
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, "utf8").split("\n")) {
      const m = /^returned (\S+)$/.exec(line);
      if (!m) continue;
      returned++;
      if (counts.get(m[1]!) !== SIZE) violation(`batch ${m[1]} was returned but has ${counts.get(m[1]!) ?? 0} jobs`);
    }
  }
  await docket.close();
  const jobs = [...counts.values()].reduce((a, b) => a + b, 0);
  console.log(`producer: ${counts.size} batches stored (${jobs} jobs), ${returned} returned to their caller, ${faults} producers killed`);
  return { adapter: adapterName, scenario: "producer", jobs, faults, reexecutions: { afterKill: 0, afterLostLease: 0, plannedRetries: 0 }, lost: 0, doubleSuccesses: 0, crashes, keyOrCapExceeded: 0, seconds: Math.round((Date.now() - started) / 1000), violations };
}

// ---------------------------------------------------------------- main

console.log(`chaos: ${adapterName}${args.galera ? " on a 3-node Galera cluster" : ""}, scenarios ${scenarios.join(", ")}, ${JOBS} jobs, seed ${seed}${SHORT ? ", short" : ""}`);
const reports: Report[] = [];
for (const scenario of scenarios) {
  const dir = mkdtempSync(join(tmpdir(), "docket-chaos-"));
  const store = await openStore(scenario, dir);
  try {
    reports.push(scenario === "producer" ? await producers(store, dir) : await workload(scenario, store, dir));
  } finally {
    // DOCKET_CHAOS_KEEP=1 keeps a run with violations (its database and its workers' logs) for a post-mortem.
    const kept = process.env.DOCKET_CHAOS_KEEP === "1" && (reports[reports.length - 1]?.violations.length ?? 1) > 0;
    if (kept) console.log(`chaos: kept ${dir} and the store at ${store.target} (prefix ${store.prefix})`);
    else {
      await store.dispose().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const r = reports[reports.length - 1]!;
  console.log(JSON.stringify({ ...r, violations: r.violations.length }));
}
await galera.cluster?.destroy();
const failed = reports.reduce((n, r) => n + r.violations.length, 0);
console.log(failed === 0 ? `chaos ${adapterName}: OK (${reports.map((r) => r.scenario).join(", ")})` : `chaos ${adapterName}: ${failed} violation(s)`);
process.exit(failed === 0 ? 0 : 1);
