/**
 * The peers docket's drain is compared with, on the same PostgreSQL:
 * graphile-worker (defaults, and its fast settings: local queue of 500 and
 * batched completions), pg-boss (defaults, and tuned: batches of 50), and a
 * raw-SQL ceiling (claim 100 rows with one UPDATE … SKIP LOCKED, delete them
 * with one DELETE, on 4 connections). Each setup fills a fresh database with
 * N no-op jobs; each worker runs in a child process (bench/peer-child.ts).
 */
/** Loads a peer from bench/node_modules; untyped, so the library's typecheck does not need them installed. */
// deno-lint-ignore no-explicit-any
const load = (specifier: string): Promise<any> => import(specifier);

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
    const { default: PgBoss } = await load("pg-boss");
    const boss = new PgBoss({ connectionString: url, supervise: false, schedule: false });
    boss.on("error", () => undefined);
    await boss.start();
    await boss.createQueue("noop");
    for (let i = 0; i < jobs; i += 1000) {
      await boss.insert(Array.from({ length: Math.min(1000, jobs - i) }, (_, k) => ({ name: "noop", data: { i: i + k } })));
    }
    await boss.stop({ graceful: false, wait: true });
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
    const { run } = await load("graphile-worker");
    const fast = peer === "graphile-fast";
    const runner = await run({
      connectionString: url,
      concurrency,
      noHandleSignals: true,
      pollInterval: 1000,
      taskList: { noop: async () => undefined },
      logger: new (await load("graphile-worker")).Logger(() => () => undefined),
      ...(fast ? { preset: { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } } } : {}),
    });
    runner.events.on("job:success", () => onDone(1));
    return { stop: () => runner.stop() };
  }
  if (peer.startsWith("pgboss")) {
    const { default: PgBoss } = await load("pg-boss");
    const tuned = peer === "pgboss-tuned";
    const boss = new PgBoss({ connectionString: url, supervise: false, schedule: false, max: tuned ? 4 : Math.max(4, concurrency) });
    boss.on("error", () => undefined);
    await boss.start();
    const subscriptions = concurrency;
    const options = tuned ? { batchSize: 50, pollingIntervalSeconds: 0.5 } : {};
    for (let i = 0; i < subscriptions; i++) {
      await boss.work("noop", options, async (jobs: unknown[]) => {
        onDone(jobs.length);
      });
    }
    return { stop: () => boss.stop({ graceful: false, wait: true }) };
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
