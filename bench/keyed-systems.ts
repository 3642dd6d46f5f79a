/**
 * The systems of the keyed benchmark (bench/keyed.ts) and how each one keys
 * job i to "k{i mod K}" with limit L:
 * - docket on each adapter: `concurrency: { key, limit }` on `enqueueMany`;
 * - graphile-worker 0.18, its defaults and its fast settings (bench/peers.ts):
 *   one named queue per key (`queueName` in `addJobs`); a named queue runs
 *   one job at a time, so it has no limit above 1;
 * - pg-boss 12, tuned as in bench/peers.ts: group id per key (`group: { id }`
 *   in `insert`) and `groupConcurrency: L` in `work`, the limit it counts
 *   in the database across processes (`localGroupConcurrency` counts in one
 *   process only), on a queue with `notify` so idle workers wake on inserts.
 * The parent opens a fresh store and enqueues; each worker process starts a
 * worker on it (bench/keyed-child.ts) whose handler calls `run(i)`.
 */
import { Docket } from "../src/index.ts";
import { PG_URL, openSpec, pgAdmin, withDatabase, type AdapterName, type Database, type StoreSpec } from "./databases.ts";
import { PGBOSS_TUNED, runGraphile, startPgBoss } from "./peers.ts";

// deno-lint-ignore no-explicit-any
const load = (specifier: string): Promise<any> => import(specifier);

export const KEYED_SYSTEMS = ["docket-postgres", "docket-sqlite", "docket-mysql", "graphile-fast", "graphile-defaults", "pgboss"] as const;
export type KeyedSystem = (typeof KEYED_SYSTEMS)[number];

export function isKeyedSystem(name: string): name is KeyedSystem {
  return (KEYED_SYSTEMS as readonly string[]).includes(name);
}

/** The docket adapter a system runs on, or null for a peer. */
export function adapterOf(system: KeyedSystem): AdapterName | null {
  return system.startsWith("docket-") ? (system.slice("docket-".length) as AdapterName) : null;
}

/** The highest key limit a system can enforce (graphile-worker's named queues: 1). */
export function maxKeyLimit(system: KeyedSystem): number {
  return system.startsWith("graphile") ? 1 : Number.POSITIVE_INFINITY;
}

/** Where a worker process finds the store: a docket store spec, or a PostgreSQL URL for a peer. */
export type Location = StoreSpec | string;

export interface KeyedStore {
  location: Location;
  /** Enqueues jobs from … from + count - 1 in one batch; job i has key "k{i mod keys}". */
  enqueue(from: number, count: number): Promise<void>;
  dispose(): Promise<void>;
}

const keyOf = (i: number, keys: number) => `k${i % keys}`;

/** A fresh, migrated, empty store of `system` for scenario `scenario` (`db`: the adapter's databases, for docket). */
export async function openKeyedStore(system: KeyedSystem, scenario: number, db: Database | null, keys: number, limit: number): Promise<KeyedStore> {
  if (adapterOf(system) !== null) {
    const adapter = await db!.open(scenario);
    const docket = new Docket({ adapter });
    await docket.migrate();
    return {
      location: db!.spec(scenario),
      enqueue: async (from, count) => {
        await docket.enqueueMany(
          Array.from({ length: count }, (_, k) => ({ task: "noop", payload: { i: from + k }, options: { concurrency: { key: keyOf(from + k, keys), limit } } })),
        );
      },
      dispose: () => adapter.close(),
    };
  }
  const database = `docket_keyed_${process.pid.toString(36)}_${scenario}`;
  await pgAdmin(`CREATE DATABASE ${database}`);
  const url = withDatabase(PG_URL, database);
  const drop = () => pgAdmin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  if (system.startsWith("graphile")) {
    const { makeWorkerUtils } = await load("graphile-worker");
    const utils = await makeWorkerUtils({ connectionString: url });
    await utils.migrate();
    return {
      location: url,
      enqueue: async (from, count) => {
        await utils.addJobs(Array.from({ length: count }, (_, k) => ({ identifier: "noop", payload: { i: from + k }, queueName: keyOf(from + k, keys) })));
      },
      dispose: async () => {
        await utils.release();
        await drop();
      },
    };
  }
  const boss = await startPgBoss(url, {});
  await boss.createQueue("noop", { notify: true });
  return {
    location: url,
    enqueue: async (from, count) => {
      await boss.insert("noop", Array.from({ length: count }, (_, k) => ({ data: { i: from + k }, group: { id: keyOf(from + k, keys) } })));
    },
    dispose: async () => {
      await boss.stop({ graceful: false });
      await drop();
    },
  };
}

export interface KeyedWorker {
  stop(): Promise<void>;
}

/**
 * Starts a worker of `system` on `location`: `concurrency` jobs at a time
 * (pg-boss: `concurrency` fetch loops of batches of up to 50, as in
 * bench/peers.ts, so up to 50 × `concurrency` jobs in flight),
 * each job running `run(i)`; resolves once the worker is polling.
 * `docketOptions` are passed to docket's worker.
 */
export async function startKeyedWorker(
  system: KeyedSystem,
  location: Location,
  concurrency: number,
  limit: number,
  run: (i: number) => Promise<void>,
  docketOptions: object,
): Promise<KeyedWorker> {
  if (adapterOf(system) !== null) {
    const adapter = await openSpec(location as StoreSpec);
    const worker = new Docket({ adapter }).worker({
      handlers: { noop: (payload) => run((payload as { i: number }).i) },
      concurrency,
      logger: null,
      ...docketOptions,
    });
    await worker.start();
    return {
      stop: async () => {
        await worker.stop();
        await adapter.close();
      },
    };
  }
  const url = location as string;
  if (system.startsWith("graphile")) {
    const runner = await runGraphile(url, concurrency, system === "graphile-fast", (payload: { i: number }) => run(payload.i));
    return { stop: () => runner.stop() };
  }
  const boss = await startPgBoss(url, { max: 4, useListenNotify: true });
  // On a notify queue a worker whose fetch came back short sleeps notifyPollingIntervalSeconds (30 s by
  // default) unless an insert wakes it: once the last batch is enqueued, the shortest allowed (0.5 s).
  await boss.work("noop", { localConcurrency: concurrency, ...PGBOSS_TUNED, notifyPollingIntervalSeconds: 0.5, groupConcurrency: limit }, async (jobs: { data: { i: number } }[]) => {
    await Promise.all(jobs.map((job) => run(job.data.i)));
  });
  return { stop: () => boss.stop({ graceful: false }) };
}
