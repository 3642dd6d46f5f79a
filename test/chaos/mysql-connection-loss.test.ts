import { describe, expect, it } from "vitest";
import { Docket } from "../../src/client/docket.ts";
import { mysqlAdapter } from "../../src/adapters/mysql/index.ts";
import { startChaosChild, type ChaosChild } from "../support/chaos-child.ts";
import { MYSQL_URL, REQUIRE_ALL } from "../support/targets.ts";

const JOBS = 400;
const MIN_KILLS = 50;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * On MariaDB/MySQL: a worker (child process) whose
 * connections are killed (`KILL <id>`) again and again survives and drains
 * every job. On the shared server, so only connections to this test's own
 * database are killed, and the server is not restarted.
 */
describe("mysql: connection loss", () => {
  it(`a worker survives ${MIN_KILLS}+ killed connections and drains all ${JOBS} jobs`, async () => {
    const mysql = (await import("mysql2/promise")).default;
    let admin: Awaited<ReturnType<typeof mysql.createConnection>>;
    try {
      admin = await mysql.createConnection({ uri: MYSQL_URL });
    } catch (error) {
      if (REQUIRE_ALL) throw error;
      console.warn(`!! SKIPPING the MySQL connection-loss test: ${String(error)}`);
      return;
    }
    const database = `docket_chaos_${process.pid}`;
    const u = new URL(MYSQL_URL);
    u.pathname = `/${database}`;
    const url = u.toString();
    let child: ChaosChild | null = null;
    try {
      await admin.query(`CREATE DATABASE ${database}`);
      const producer = new Docket({ adapter: mysqlAdapter({ uri: url, connectionLimit: 2 }) });
      await producer.migrate();
      await producer.enqueueMany(Array.from({ length: JOBS }, (_, i) => ({ task: "work", payload: i })));
      await producer.close();
      child = startChaosChild("mysql", url);
      const succeeded = async () =>
        Number(((await admin.query(`SELECT count(*) AS n FROM ${database}.docket_jobs WHERE state = 'succeeded'`)) as [{ n: number }[], unknown])[0][0]!.n);
      let kills = 0;
      const deadline = Date.now() + 120_000;
      for (;;) {
        expect(child.exitCode(), `worker process died: ${child.stderr()}`).toBeUndefined();
        if (Date.now() > deadline) throw new Error(`not drained in 120 s: ${await succeeded()} of ${JOBS} succeeded`);
        if (kills < MIN_KILLS) {
          const [rows] = (await admin.query("SELECT id FROM information_schema.processlist WHERE db = ? AND id <> connection_id()", [database])) as [{ id: number }[], unknown];
          for (const { id } of rows) await admin.query(`KILL ${Number(id)}`).catch(() => undefined);
          if (rows.length > 0) kills++;
          await sleep(100);
          continue;
        }
        if ((await succeeded()) === JOBS) break;
        await sleep(200);
      }
      const { code, report } = await child.stop();
      const runs = child.runs;
      const missing = Array.from({ length: JOBS }, (_, i) => i).filter((i) => !runs.has(i));
      const figures = {
        jobs: JOBS,
        succeeded: await succeeded(),
        killRounds: kills,
        workerCrashes: code === 0 ? 0 : 1,
        lostJobs: missing.length,
        lostLeaseEvents: report?.lost,
        errorEvents: report?.errors,
        ranTwice: [...runs.values()].filter((n) => n > 1).length,
      };
      console.log(`mysql connection-loss figures: ${JSON.stringify(figures)}`);
      expect(code, child.stderr()).toBe(0);
      expect(missing).toEqual([]);
      expect(figures.succeeded).toBe(JOBS);
      expect(kills).toBeGreaterThanOrEqual(MIN_KILLS);
    } finally {
      child?.kill();
      await admin.query(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined);
      await admin.end();
    }
  }, 180_000);
});
