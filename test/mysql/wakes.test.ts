import { spawn } from "node:child_process";
import { join } from "node:path";
import { Kysely, MysqlDialect } from "kysely";
import { afterAll, describe, expect, it } from "vitest";
import { mysqlAdapter } from "../../src/adapters/mysql/index.ts";
import type { ReadyNotice } from "../../src/core/adapter.ts";
import { Docket, InvalidArgumentError } from "../../src/index.ts";
import { MYSQL_URL, REQUIRE_ALL } from "../support/targets.ts";
import { until } from "../support/until.ts";
import { idleWorkerWakesForFreedCapSlot, idleWorkerWakesForOtherConnection } from "../support/wake.ts";

const mysql = (await import("mysql2/promise")).default;
const mysqlCallbackPool = (await import("mysql2")).default;
const CHILD = join(import.meta.dirname, "../support/enqueue-child.ts");
const database = `docket_wakes_${process.pid.toString(36)}${Date.now().toString(36)}`;
let url: string | null = null;
try {
  const root = await mysql.createConnection({ uri: MYSQL_URL });
  await root.query(`CREATE DATABASE ${database}`);
  await root.end();
  const u = new URL(MYSQL_URL);
  u.pathname = `/${database}`;
  url = u.toString();
} catch (error) {
  if (REQUIRE_ALL) throw error;
  console.warn(`\n${"!".repeat(78)}\n!! SKIPPING the MariaDB wake-up tests: ${String(error)}\n${"!".repeat(78)}\n`);
}
afterAll(async () => {
  if (!url) return;
  const root = await mysql.createConnection({ uri: MYSQL_URL });
  await root.query(`DROP DATABASE IF EXISTS ${database}`);
  await root.end();
});

let prefixes = 0;
/** Two adapters on one store, as two processes would open it: the consumer side and the producer side. */
async function withTwoStores(fn: (consumer: Docket, producer: Docket, prefix: string) => Promise<void>, wakeCheckMs?: number): Promise<void> {
  const tablePrefix = `w${prefixes++}_`;
  const a = mysqlAdapter({ uri: url!, tablePrefix, ...(wakeCheckMs === undefined ? {} : { wakeCheckMs }) });
  const b = mysqlAdapter({ uri: url!, tablePrefix });
  try {
    const producer = new Docket({ adapter: b });
    await producer.migrate();
    await fn(new Docket({ adapter: a }), producer, tablePrefix);
  } finally {
    await a.close();
    await b.close();
  }
}

/** Runs test/support/enqueue-child.ts: another process enqueues `count` jobs (task "t"), each after a random pause of up to `gapMs`; resolves with when each enqueue returned (Date.now()). */
function enqueueFromAnotherProcess(prefix: string, count: number, gapMs: number): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, url!, prefix, String(count), String(gapMs)], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += String(d)));
    child.stderr.on("data", (d) => (err += String(d)));
    child.on("exit", (code) => {
      if (code !== 0) return reject(new Error(`enqueue-child exited ${code}: ${err}`));
      const at: number[] = [];
      for (const line of out.split("\n").filter(Boolean)) {
        const r = JSON.parse(line) as { i: number; at: number };
        at[r.i] = r.at;
      }
      resolve(at);
    });
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * MariaDB has no NOTIFY: an idle worker hears of another connection's
 * (another process's) ready job from the store's wake counters, read every
 * `wakeCheckMs`, long before its next poll.
 */
describe.skipIf(!url)("mysql: other connections' commits wake idle workers (wake counters)", () => {
  it("another connection's enqueue, and a write inside a caller's transaction once committed, reach onReady as {queue: null, due: true}", () =>
    withTwoStores(async (consumer, producer) => {
      const notices: ReadyNotice[] = [];
      await consumer.adapter.get({ id: 0 }); // opens the pool
      const unsubscribe = consumer.adapter.onReady!((n) => notices.push(n));
      await new Promise((r) => setTimeout(r, 100));
      await producer.enqueue("t", {});
      await until(() => notices.length > 0, 2_000, "a notice after another connection's enqueue");
      expect(notices[0]).toEqual({ queue: null, due: true });
      // Inside the application's own transaction: the wake counts when it commits, not before.
      const app = new Kysely<any>({ dialect: new MysqlDialect({ pool: mysqlCallbackPool.createPool({ uri: url!, connectionLimit: 2 }) }) });
      try {
        await app.transaction().execute(async (trx) => {
          await producer.enqueue("t", {}, { transaction: trx });
          notices.length = 0;
          await new Promise((r) => setTimeout(r, 300));
          expect(notices).toEqual([]);
        });
        await until(() => notices.length > 0, 2_000, "a notice once the application's transaction committed");
      } finally {
        await app.destroy();
      }
      unsubscribe();
    }));

  it("an idle worker with an hour's poll starts a job enqueued, and a job replayed, through another connection", () =>
    withTwoStores(async (consumer, producer) => {
      await idleWorkerWakesForOtherConnection(consumer, producer);
    }));

  it("an idle worker with an hour's poll starts a capped queue's job when another connection's worker frees the cap's slot", () =>
    withTwoStores(async (consumer, producer) => {
      await idleWorkerWakesForFreedCapSlot(consumer, producer);
    }));

  it("start latency of a job another process enqueues, to an idle worker (default pollMs 1 s): p50 well under the poll", () =>
    withTwoStores(async (consumer, _producer, prefix) => {
      const startedAt = new Map<number, number>();
      const worker = consumer.worker({ handlers: { t: (payload) => void startedAt.set((payload as { i: number }).i, Date.now()) }, logger: null });
      await worker.start();
      const jobs = 9;
      let enqueuedAt: number[];
      try {
        // Each job after a random pause of up to 1.2 s: a random phase against the 1 s poll.
        enqueuedAt = await enqueueFromAnotherProcess(prefix, jobs, 1_200);
        await until(() => startedAt.size === jobs, 5_000, "every job started");
      } finally {
        await worker.stop();
      }
      const samples = enqueuedAt.map((at, i) => Math.max(0, startedAt.get(i)! - at));
      console.log(`MariaDB idle start latency, enqueued by another process (wakeCheckMs 25, pollMs 1000): p50 ${median(samples).toFixed(0)} ms; samples ${samples.join(", ")} ms`);
      expect(median(samples)).toBeLessThan(500);
    }), 60_000);

  it("wakeCheckMs 0 turns wake-ups off; a bad value is refused and writes nothing", async () => {
    await withTwoStores(async (consumer) => {
      expect(consumer.adapter.onReady).toBeUndefined();
    }, 0);
    for (const bad of [-1, 1.5, Number.NaN, "25"]) {
      expect(() => mysqlAdapter({ uri: url!, wakeCheckMs: bad as never })).toThrow(InvalidArgumentError);
    }
  });
});
