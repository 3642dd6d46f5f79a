/**
 * The peers docket's drain is compared with, on the same PostgreSQL:
 * graphile-worker 0.18 (defaults, and its fast settings: local queue of 500
 * and batched completions), pg-boss 12 (defaults, and tuned: batches
 * of 50 fetched back to back while full), and a
 * raw-SQL ceiling (claim 100 rows with one UPDATE … SKIP LOCKED, delete them
 * with one DELETE, on 4 connections). Each setup fills a fresh database with
 * N no-op jobs; each worker runs in a child process (bench/peer-child.ts).
 */
/** Loads a peer from bench/node_modules; untyped, so the library's typecheck does not need them installed. */
// deno-lint-ignore no-explicit-any
const load = (specifier: string): Promise<any> => import(specifier);

/**
 * graphile-worker's fast settings (0.18, `preset.worker` in its index.d.ts): a
 * local queue of 500 jobs fetched per pool, completions and failures batched
 * (a delay of 0: those requested in one tick are written together; -1, the
 * default, writes each alone).
 */
export const GRAPHILE_FAST_PRESET = { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } };

/**
 * pg-boss's tuned `work` options (12.x, WorkOptions in dist/types.d.ts):
 * batches of 50, the shortest poll it accepts, and `burstWhenBatchFull`,
 * which fetches again at once while fetches come back full (without it a
 * worker sleeps out the poll interval after every batch, as 10.x did).
 */
export const PGBOSS_TUNED = { batchSize: 50, pollingIntervalSeconds: 0.5, burstWhenBatchFull: true };

/** A started graphile-worker runner of `concurrency` whose task "noop" runs `task(payload)`. */
// deno-lint-ignore no-explicit-any
export async function runGraphile(url: string, concurrency: number, fast: boolean, task: (payload: any) => Promise<void>): Promise<any> {
  const { run, Logger } = await load("graphile-worker");
  return run({
    connectionString: url,
    concurrency,
    noHandleSignals: true,
    pollInterval: 1000,
    taskList: { noop: task },
    logger: new Logger(() => () => undefined),
    ...(fast ? { preset: GRAPHILE_FAST_PRESET } : {}),
  });
}

/** A started pg-boss instance (12.x: the named export `PgBoss`) without supervision or schedules, errors ignored. */
// deno-lint-ignore no-explicit-any
export async function startPgBoss(url: string, options: object): Promise<any> {
  const { PgBoss } = await load("pg-boss");
  const boss = new PgBoss({ connectionString: url, supervise: false, schedule: false, ...options });
  boss.on("error", () => undefined);
  await boss.start();
  return boss;
}

export const PEERS = ["graphile-defaults", "graphile-fast", "pgboss-defaults", "pgboss-tuned", "raw-ceiling"] as const;
export type PeerName = (typeof PEERS)[number];

export function isPeer(name: string): name is PeerName {
  return (PEERS as readonly string[]).includes(name);
}

/** Fills the database at `url` with `jobs` no-op jobs of the peer's kind. */
export async function setupPeer(peer: PeerName, url: string, jobs: number): Promise<void> {
  if (peer.startsWith("graphile")) {
    const { makeWorkerUtils } = await load("graphile-worker");
    const utils = await makeWorkerUtils({ connectionString: url });
    await utils.migrate();
    for (let i = 0; i < jobs; i += 1000) {
      await utils.addJobs(Array.from({ length: Math.min(1000, jobs - i) }, (_, k) => ({ identifier: "noop", payload: { i: i + k } })));
    }
    await utils.release();
    return;
  }
  if (peer.startsWith("pgboss")) {
    const boss = await startPgBoss(url, {});
    await boss.createQueue("noop");
    for (let i = 0; i < jobs; i += 1000) {
      await boss.insert("noop", Array.from({ length: Math.min(1000, jobs - i) }, (_, k) => ({ data: { i: i + k } })));
    }
    await boss.stop({ graceful: false });
    return;
  }
  const pg = (await import("pg")).default;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(`CREATE TABLE raw_jobs (id bigserial PRIMARY KEY, payload jsonb NOT NULL, state text NOT NULL DEFAULT 'ready', locked_by text)`);
  await c.query(`CREATE INDEX raw_jobs_ready ON raw_jobs (id) WHERE state = 'ready'`);
  await c.query(`INSERT INTO raw_jobs (payload) SELECT jsonb_build_object('i', g) FROM generate_series(1, $1) g`, [jobs]);
  await c.end();
}

/** A running peer worker: `stop` ends it; `onDone(n)` is called with each job finished. */
export interface PeerWorker {
  stop(): Promise<void>;
}

export async function startPeer(peer: PeerName, url: string, concurrency: number, onDone: (n: number) => void): Promise<PeerWorker> {
  if (peer.startsWith("graphile")) {
    const runner = await runGraphile(url, concurrency, peer === "graphile-fast", async () => undefined);
    runner.events.on("job:success", () => onDone(1));
    return { stop: () => runner.stop() };
  }
  if (peer.startsWith("pgboss")) {
    const tuned = peer === "pgboss-tuned";
    const boss = await startPgBoss(url, { max: tuned ? 4 : Math.max(4, concurrency) });
    await boss.work("noop", { localConcurrency: concurrency, ...(tuned ? PGBOSS_TUNED : {}) }, async (jobs: unknown[]) => {
      onDone(jobs.length);
    });
    return { stop: () => boss.stop({ graceful: false }) };
  }
  const pg = (await import("pg")).default;
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  let stopping = false;
  const loop = async (n: number) => {
    while (!stopping) {
      const claimed = await pool.query(
        `UPDATE raw_jobs SET state = 'running', locked_by = $1 WHERE id IN (SELECT id FROM raw_jobs WHERE state = 'ready' ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED) RETURNING id, payload`,
        [`w${n}`],
      );
      if (claimed.rows.length === 0) {
        await new Promise((r) => setTimeout(r, 10));
        continue;
      }
      await pool.query(`DELETE FROM raw_jobs WHERE id = ANY($1::bigint[])`, [claimed.rows.map((r: { id: string }) => r.id)]);
      onDone(claimed.rows.length);
    }
  };
  const loops = [0, 1, 2, 3].map(loop);
  return {
    stop: async () => {
      stopping = true;
      await Promise.all(loops);
      await pool.end();
    },
  };
}
