import { describe, expect, it } from "vitest";
import { Docket } from "../../src/client/docket.ts";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import { postgresBinDir, startPrivatePostgres } from "../support/private-postgres.ts";
import { startChaosChild, type ChaosChild } from "../support/chaos-child.ts";
import { REQUIRE_ALL } from "../support/targets.ts";

const JOBS = 600;
const MIN_TERMINATIONS = 50;
const RESTARTS = 2;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A PostgreSQL worker whose connections are terminated
 * (pg_terminate_backend) again and again, and whose server restarts twice,
 * survives, reports the errors as events and drains every job. On a private
 * server this test owns (test/support/private-postgres.ts), in a child
 * process, so that a crash shows as the child's exit.
 */
describe("postgres: connection loss", () => {
  const binaries = postgresBinDir();
  if (!binaries) {
    if (REQUIRE_ALL) throw new Error("DOCKET_REQUIRE_ALL_ADAPTERS=1 but the PostgreSQL server binaries (initdb, pg_ctl) are missing");
    console.warn(`\n${"!".repeat(78)}\n!! SKIPPING the PostgreSQL connection-loss test: initdb/pg_ctl not found\n${"!".repeat(78)}\n`);
    return;
  }

  it(`a worker survives ${MIN_TERMINATIONS}+ terminated connections and ${RESTARTS} server restarts, and drains all ${JOBS} jobs`, async () => {
    const server = await startPrivatePostgres();
    const pg = (await import("pg")).default;
    let admin = new pg.Client({ connectionString: server.url });
    const connectAdmin = async () => {
      admin = new pg.Client({ connectionString: server.url });
      admin.on("error", () => undefined); // the restarts drop it too
      await admin.connect();
    };
    let child: ChaosChild | null = null;
    try {
      await connectAdmin();
      await admin.query("CREATE DATABASE chaos");
      const url = server.url.replace(/\/postgres$/, "/chaos");
      const producer = new Docket({ adapter: postgresAdapter({ connectionString: url, max: 2 }) });
      await producer.migrate();
      await producer.enqueueMany(Array.from({ length: JOBS }, (_, i) => ({ task: "work", payload: i })));
      await producer.close();

      child = startChaosChild("postgres", url);

      let terminations = 0;
      let restarts = 0;
      const succeeded = async () => {
        try {
          const c = new pg.Client({ connectionString: url });
          c.on("error", () => undefined);
          await c.connect();
          try {
            return Number((await c.query("SELECT count(*)::int AS n FROM docket_jobs WHERE state = 'succeeded'")).rows[0].n);
          } finally {
            await c.end();
          }
        } catch {
          return -1;
        }
      };
      const deadline = Date.now() + 120_000;
      for (;;) {
        expect(child.exitCode(), `worker process died: ${child.stderr()}`).toBeUndefined();
        if (Date.now() > deadline) throw new Error(`not drained in 120 s: ${await succeeded()} of ${JOBS} succeeded`);
        if (terminations < MIN_TERMINATIONS) {
          const r = await admin.query("SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = 'chaos' AND pid <> pg_backend_pid()");
          if (Number(r.rows[0].n) > 0) terminations++;
          if (restarts < RESTARTS && terminations >= (restarts + 1) * 20) {
            await admin.end().catch(() => undefined);
            await server.restart();
            restarts++;
            await connectAdmin();
          }
          await sleep(100);
          continue;
        }
        if ((await succeeded()) === JOBS) break;
        await sleep(200);
      }
      const { code, report } = await child.stop();
      const runs = child.runs;
      const missing = Array.from({ length: JOBS }, (_, i) => i).filter((i) => !runs.has(i));
      const twice = [...runs.values()].filter((n) => n > 1).length;
      const figures = {
        jobs: JOBS,
        succeeded: await succeeded(),
        terminations,
        restarts,
        workerCrashes: code === 0 ? 0 : 1,
        lostJobs: missing.length,
        lostLeaseEvents: report?.lost,
        errorEvents: report?.errors,
        connectionErrorEvents: report?.connectionErrors,
        ranTwice: twice,
      };
      console.log(`postgres connection-loss figures: ${JSON.stringify(figures)}`);
      expect(code, child.stderr()).toBe(0);
      expect(figures.succeeded).toBe(JOBS);
      expect(missing).toEqual([]);
      expect(terminations).toBeGreaterThanOrEqual(MIN_TERMINATIONS);
      expect(restarts).toBe(RESTARTS);
      expect(report!.errors, "the dropped connections were reported as worker error events").toBeGreaterThan(0);
    } finally {
      child?.kill();
      await admin.end().catch(() => undefined);
      await server.destroy();
    }
  }, 180_000);
});
