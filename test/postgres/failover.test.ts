import { afterAll, describe, expect, it } from "vitest";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import { Docket } from "../../src/index.ts";
import { startReplicatedPostgres } from "../support/private-replicated-postgres.ts";

const pg = (await import("pg")).default;
const cluster = await startReplicatedPostgres("the PostgreSQL failover test");
afterAll(async () => cluster?.destroy());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const DATABASE = "docket_failover";
const PRODUCE_MS = 10_000;
const FAILOVER_AT_MS = 3_000;
const READ_ONLY_MS = 2_000;
const DRAIN_BOUND_MS = 60_000;

/**
 * A primary crashes under load and its synchronous standby is promoted,
 * behind one address (a TCP proxy) that first lands on the standby while it
 * is still read-only (SQLSTATE 25006), then stays on it once promoted.
 * Contract: no acknowledged enqueue is lost; every job ends succeeded,
 * exactly once in the table, after its handler ran; the read-only window
 * and the dropped connections never count as a failed attempt (a lease that
 * expired meanwhile may re-run a job: at-least-once).
 */
describe.skipIf(!cluster)("postgres failover to a synchronous standby", () => {
  it("acknowledged jobs survive a crash of the primary and all succeed on the promoted standby", async () => {
    const { proxy, primaryPort, standbyPort } = cluster!;
    const admin = new pg.Client({ connectionString: cluster!.url(primaryPort) });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${DATABASE}`);
    await admin.end();
    const viaProxy = cluster!.url(proxy.port, DATABASE);

    const runs = new Map<number, number[]>();
    const errorEvents: string[] = [];
    const failedEvents: string[] = [];
    /** When each job's success was acknowledged to its worker (the outcome write committed). */
    const succeededAt = new Map<number, number>();
    let lost = 0;
    let promotedAt = Infinity;
    let firstSuccessAfterPromotion = Infinity;
    const succeededAfterPromotion = [0, 0];
    const consumers = [0, 1].map(() => new Docket({ adapter: postgresAdapter({ connectionString: viaProxy, max: 4, logger: null }) }));
    const producer = new Docket({ adapter: postgresAdapter({ connectionString: viaProxy, max: 2, logger: null }) });
    const workers = consumers.map((docket, w) =>
      docket.worker({
        handlers: {
          t: async (_payload: unknown, ctx) => {
            runs.set(ctx.job.id, [...(runs.get(ctx.job.id) ?? []), performance.now()]);
            await sleep(3);
          },
        },
        concurrency: 4,
        pollMs: 200,
        leaseMs: 3_000,
        logger: null,
        onEvent: (e) => {
          if (e.type === "error") errorEvents.push(`${e.operation}: ${e.error.message.split("\n")[0]}`);
          else if (e.type === "retry" || e.type === "dead") failedEvents.push(`${e.type} job ${e.job.id}: ${e.job.lastError}`);
          else if (e.type === "lost") lost++;
          if (e.type === "succeeded") succeededAt.set(e.job.id, performance.now());
          if (e.type === "succeeded" && performance.now() > promotedAt) {
            succeededAfterPromotion[w]!++;
            firstSuccessAfterPromotion = Math.min(firstSuccessAfterPromotion, performance.now());
          }
        },
      }),
    );

    const direct = new pg.Client({ connectionString: cluster!.url(standbyPort, DATABASE) });
    try {
      await producer.migrate();
      await Promise.all(workers.map((w) => w.start()));

      const acknowledged = new Set<number>();
      const refusals: string[] = [];
      const t0 = performance.now();
      const produce = (async () => {
        for (let n = 0; performance.now() - t0 < PRODUCE_MS; ) {
          try {
            acknowledged.add((await producer.enqueue("t", { n })).id);
            n++;
          } catch (error) {
            refusals.push((error as Error).message.split("\n")[0]!);
            await sleep(20);
          }
          await sleep(2);
        }
      })();
      const failover = (async () => {
        await sleep(FAILOVER_AT_MS);
        proxy.moveTo(standbyPort);
        await cluster!.crashPrimary();
        await sleep(READ_ONLY_MS);
        await cluster!.promoteStandby();
        promotedAt = performance.now();
        proxy.moveTo(standbyPort);
      })();
      await Promise.all([produce, failover]);
      const producedAt = performance.now();

      await direct.connect();
      const unfinished = async () => (await direct.query(`select count(*)::int as n from docket_jobs where state <> 'succeeded'`)).rows[0].n as number;
      while ((await unfinished()) > 0 && performance.now() - producedAt < DRAIN_BOUND_MS) await sleep(100);
      const drainedAt = performance.now();

      const rows = (await direct.query(`select id::int as id, state, payload, last_error, errors from docket_jobs order by id`)).rows as {
        id: number;
        state: string;
        payload: string;
        last_error: string | null;
        errors: string | null;
      }[];
      const stored = new Map(rows.map((r) => [r.id, r]));
      const states: Record<string, number> = {};
      for (const r of rows) states[r.state] = (states[r.state] ?? 0) + 1;
      const missing = [...acknowledged].filter((id) => !stored.has(id));
      const neverRan = rows.filter((r) => r.state === "succeeded" && !runs.has(r.id)).map((r) => r.id);
      // Errors a job recorded other than a reclaimed lease: the outage counted as a failed attempt.
      const outageErrors = rows.flatMap((r) =>
        [r.last_error, ...(r.errors ? (JSON.parse(r.errors) as { error: string }[]).map((e) => e.error) : [])]
          .filter((e): e is string => e !== null && !e.startsWith("lease expired"))
          .map((e) => `job ${r.id}: ${e.split("\n")[0]}`),
      );
      const reRun = [...runs.values()].filter((starts) => starts.length > 1);
      // An acknowledged outcome lost: the job ran again after its success was acknowledged.
      const ranAfterSuccess = [...runs].filter(([id, starts]) => starts.some((t) => t > (succeededAt.get(id) ?? Infinity))).map(([id]) => id);
      // A job run twice must owe it to a lease that expired (at-least-once after a crash), recorded as such.
      const reRunUnexplained = [...runs].filter(([id, starts]) => starts.length > 1 && !`${stored.get(id)?.errors ?? ""}`.includes("lease expired")).map(([id]) => id);
      const payloads = new Set(rows.map((r) => JSON.parse(r.payload).n));
      const byOperation: Record<string, number> = {};
      for (const e of errorEvents) byOperation[e.split(":")[0]!] = (byOperation[e.split(":")[0]!] ?? 0) + 1;
      console.log(
        `failover: stored ${rows.length} jobs (${rows.length - payloads.size} duplicate enqueues), acknowledged ${acknowledged.size}, not acknowledged ${refusals.length}; ` +
          `runs ${[...runs.values()].reduce((a, s) => a + s.length, 0)}, jobs re-run ${reRun.length}; lost ${lost}; ` +
          `worker error events ${errorEvents.length} ${JSON.stringify(byOperation)}; states ${JSON.stringify(states)}; ` +
          `promotion→first success ${Math.round(firstSuccessAfterPromotion - promotedAt)} ms, producer end→drained ${Math.round(drainedAt - producedAt)} ms, ` +
          `promotion→drained ${Math.round(drainedAt - promotedAt)} ms; jobs per worker after promotion ${JSON.stringify(succeededAfterPromotion)}`,
      );
      const healthy = states.succeeded === rows.length && succeededAfterPromotion.every((n) => n > 0);
      if (!healthy || failedEvents.length + outageErrors.length + missing.length + neverRan.length > 0) {
        console.log(`failover evidence:\n${[...failedEvents, ...outageErrors, ...missing.map((id) => `acknowledged job ${id} missing`)].slice(0, 20).join("\n")}`);
        console.log(`first worker errors:\n${errorEvents.slice(0, 20).join("\n")}\nfirst refusals:\n${refusals.slice(0, 5).join("\n")}`);
      }

      expect(missing, "acknowledged enqueues missing on the promoted standby").toEqual([]);
      expect(states, "every stored job ends succeeded").toEqual({ succeeded: rows.length });
      expect(failedEvents, "retry/dead events: an outage counted as a handler failure").toEqual([]);
      expect(outageErrors, "recorded errors other than a reclaimed lease").toEqual([]);
      expect(neverRan, "succeeded jobs whose handler never ran").toEqual([]);
      expect(ranAfterSuccess, "jobs run again after their success was acknowledged (an acknowledged outcome lost)").toEqual([]);
      expect(reRunUnexplained, "jobs run twice without an expired lease recorded").toEqual([]);
      expect([...refusals, ...errorEvents].some((e) => e.includes("read-only transaction")), "statements refused by the read-only standby (25006)").toBe(true);
      expect(succeededAfterPromotion.every((n) => n > 0), "both workers still run jobs after the promotion").toBe(true);
    } finally {
      await Promise.all(workers.map((w) => w.stop({ timeoutMs: 5_000 })));
      await Promise.all([...consumers, producer].map((d) => d.close()));
      await direct.end().catch(() => undefined);
    }
  }, 120_000);
});
