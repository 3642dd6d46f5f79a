import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import { Docket } from "../../src/index.ts";
import { startPrivatePgbouncer } from "../support/private-pgbouncer.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../support/targets.ts";
import { until } from "../support/until.ts";

const pg = (await import("pg")).default;
const CHILD = join(import.meta.dirname, "../support/enqueue-child.ts");
const what = "the PgBouncer (transaction pooling) tests";
const created = await createPgTestDatabase("docket_pgbouncer", what);
// Four server connections for the load test; one for the cross-process test, where it makes every step deterministic.
const bouncer = created ? await startPrivatePgbouncer(what, 4) : null;
const single = created && bouncer ? await startPrivatePgbouncer(what, 1) : null;
afterAll(async () => {
  await bouncer?.destroy();
  await single?.destroy();
  if (created) await dropPgDatabase(PG_URL, created.database);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function count(sql: string): Promise<number> {
  const c = new pg.Client({ connectionString: created!.url });
  await c.connect();
  try {
    return (await c.query(sql)).rows[0].n as number;
  } finally {
    await c.end();
  }
}

/** Runs test/support/enqueue-child.ts: another process's docket enqueues one job through `url`. */
function enqueueFromAnotherProcess(url: string, prefix: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, url, prefix], { stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    child.stderr.on("data", (d) => (err += String(d)));
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`enqueue-child exited ${code}: ${err}`))));
  });
}

/**
 * PgBouncer 1.18 in transaction mode hands each transaction (each autocommit
 * statement) to whichever server connection is free, and does not keep
 * protocol-level prepared statements: a name prepared by one client is
 * missing on another server connection (SQLSTATE 26000), or present there
 * from another client (42P05). With the default `preparedStatements`, the
 * adapter must notice, run unnamed from then on, and say so once.
 */
describe.skipIf(!created || !bouncer)("postgres behind PgBouncer in transaction mode", () => {
  // First in this file: the old naming (docket_0, docket_1, … in the order a process compiles) gave this
  // process's first text and the child's first text the same name.
  it("a statement name this process parsed never runs another process's statement on a shared server connection", async () => {
    const direct = created!.url;
    const url = single!.urlFor(direct);
    for (const prefix of ["xa_", "xb_"]) {
      const a = postgresAdapter({ connectionString: direct, tablePrefix: prefix });
      await new Docket({ adapter: a }).migrate();
      await a.close();
    }
    const warned: string[] = [];
    const adapter = postgresAdapter({ connectionString: url, tablePrefix: "xb_", logger: { warn: (m) => void warned.push(m) } });
    const raw = new pg.Client({ connectionString: url });
    await raw.connect();
    try {
      const docket = new Docket({ adapter });
      // Parsed under its name on the one server connection; pg remembers that for its client connection.
      await docket.enqueue("t", { n: 1 });
      // The server connection loses its statements, as a new one PgBouncer opens (server_lifetime) has none.
      await raw.query("DEALLOCATE ALL");
      // Another process of the same app, prefix xa_, prepares its first statement there.
      await enqueueFromAnotherProcess(url, "xa_");
      // pg sends only "execute <name>" now: whatever that name means on the server connection runs.
      await docket.enqueue("t", { n: 2 });
      const rows = { xa_jobs: await count("select count(*)::int as n from xa_jobs"), xb_jobs: await count("select count(*)::int as n from xb_jobs") };
      console.log(`PgBouncer cross-process: jobs per table ${JSON.stringify(rows)}; adapter warnings: ${warned.length}`);
      expect(rows).toEqual({ xa_jobs: 1, xb_jobs: 2 });
    } finally {
      await raw.end();
      await adapter.close();
    }
  }, 60_000);

  it("3,000 jobs enqueued one by one and run by two workers, each its own pool, all succeed; each adapter says at most once to set preparedStatements: false, the producer's always", async () => {
    const url = bouncer!.urlFor(created!.url);
    const JOBS = 3_000;
    const warned: string[][] = [[], [], []];
    const backgroundErrors: string[] = [];
    const adapters = warned.map((w) => postgresAdapter({ connectionString: url, tablePrefix: "pb_", max: 4, logger: { warn: (m) => void w.push(m) } }));
    for (const a of adapters) a.onError?.((e) => void backgroundErrors.push(e.message));
    const [producer, ...consumers] = adapters.map((adapter) => new Docket({ adapter }));
    const errorEvents: string[] = [];
    const workerWarnings: string[] = [];
    const enqueueErrors: string[] = [];
    const workers = consumers.map((d) =>
      d.worker({
        handlers: { t: () => undefined },
        concurrency: 8,
        logger: { warn: (m) => void workerWarnings.push(m) },
        onEvent: (e) => void (e.type === "error" && errorEvents.push(`${e.operation}: ${e.error.message}`)),
      }),
    );
    try {
      await producer!.migrate();
      await Promise.all(workers.map((w) => w.start()));
      const t0 = performance.now();
      for (let i = 0; i < JOBS; i += 10) {
        await Promise.all(
          Array.from({ length: 10 }, (_, j) => producer!.enqueue("t", { n: i + j }).catch((e: Error) => void enqueueErrors.push(e.message))),
        );
      }
      const enqueuedMs = performance.now() - t0;
      const boundMs = 60_000;
      let succeeded = 0;
      while (performance.now() - t0 < boundMs) {
        succeeded = await count("select count(*)::int as n from pb_jobs where state = 'succeeded'");
        if (succeeded >= JOBS) break;
        await sleep(250);
      }
      const ranMs = performance.now() - t0;
      const distinct = (xs: string[]) => [...new Set(xs.map((x) => x.replace(/docket_\w+/g, "docket_…")))].slice(0, 5);
      console.log(
        [
          `PgBouncer load: ${succeeded} of ${JOBS} jobs succeeded in ${(ranMs / 1000).toFixed(1)} s (enqueued in ${(enqueuedMs / 1000).toFixed(1)} s)`,
          `  enqueue errors: ${enqueueErrors.length} ${JSON.stringify(distinct(enqueueErrors))}`,
          `  worker error events: ${errorEvents.length} ${JSON.stringify(distinct(errorEvents))}`,
          `  worker logger warnings: ${workerWarnings.length}; adapter onError: ${backgroundErrors.length}`,
          `  adapter logger warnings (producer, worker 1, worker 2): ${warned.map((w) => w.length).join(", ")}`,
          ...[...new Set(warned.flat().map((m) => m.slice(0, 160)))].map((m) => `  warning: ${m}`),
        ].join("\n"),
      );
      expect({ succeeded, enqueueErrors: enqueueErrors.length, errorEvents: errorEvents.length }).toEqual({ succeeded: JOBS, enqueueErrors: 0, errorEvents: 0 });
      for (const [i, w] of warned.entries()) {
        // One warning about prepared statements; and, when the run lasts past the notice probe's 5 s (a loaded
        // machine), at most one more: the probe's, that notices do not arrive (listenConnectionString).
        // The producer names every single enqueue, so it meets a name taken on a shared server connection at once;
        // a worker names only the statement after a claim that found nothing, so whether it ever meets one is
        // timing (one CI run of session 62: 1, 1, 0), and it says so at most once.
        const [prepared, others] = [w.filter((m) => m.includes("postgresAdapter({ preparedStatements: false })")), w.filter((m) => !m.includes("preparedStatements"))];
        if (i === 0) expect(prepared).toHaveLength(1);
        else expect(prepared.length).toBeLessThanOrEqual(1);
        expect(others.length).toBeLessThanOrEqual(1);
        for (const m of others) expect(m).toContain("listenConnectionString");
        expect(prepared.length + others.length).toBe(w.length);
      }
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
      for (const a of adapters) await a.close();
    }
  }, 120_000);

  it("notices not delivered through PgBouncer: a worker's adapter says so once (naming listenConnectionString) within 5 s of LISTEN; with listenConnectionString to the server, nothing", async () => {
    const url = bouncer!.urlFor(created!.url);
    const warned: Record<string, string[]> = { pooled: [], direct: [] };
    for (const mode of ["pooled", "direct"] as const) {
      const adapter = postgresAdapter({
        connectionString: url,
        tablePrefix: "probe_",
        preparedStatements: false,
        logger: { warn: (m) => warned[mode]!.push(m) },
        ...(mode === "direct" ? { listenConnectionString: created!.url } : {}),
      });
      const docket = new Docket({ adapter });
      const worker = docket.worker({ handlers: { t: () => undefined }, logger: null, pollMs: 200 });
      try {
        await docket.migrate();
        await worker.start();
        if (mode === "pooled") await until(() => warned.pooled!.length > 0, 8_000, "the warning that notices are not delivered");
        else await sleep(6_500);
        await sleep(500);
      } finally {
        await worker.stop();
        await adapter.close();
      }
    }
    console.log(`PgBouncer notice probe: through the pooler ${warned.pooled!.length} warning(s): ${warned.pooled![0]}; with listenConnectionString ${warned.direct!.length}`);
    expect(warned.pooled).toHaveLength(1);
    expect(warned.pooled![0]).toMatch(/listenConnectionString/);
    expect(warned.direct).toEqual([]);
  }, 30_000);

  it("idle start latency: the poll interval through PgBouncer (LISTEN there delivers nothing); NOTIFY again with listenConnectionString", async () => {
    const url = bouncer!.urlFor(created!.url);
    const p50: Record<string, number> = {};
    for (const mode of ["poll", "listen"] as const) {
      const prefix = `pl${mode === "poll" ? 0 : 1}_`;
      const consumerAdapter = postgresAdapter({ connectionString: url, tablePrefix: prefix, logger: null, ...(mode === "listen" ? { listenConnectionString: created!.url } : {}) });
      const producerAdapter = postgresAdapter({ connectionString: url, tablePrefix: prefix, logger: null });
      const producer = new Docket({ adapter: producerAdapter });
      const startedAt = new Map<number, number>();
      const worker = new Docket({ adapter: consumerAdapter }).worker({
        handlers: { t: (payload) => void startedAt.set((payload as { i: number }).i, performance.now()) },
        logger: null,
      });
      const samples: number[] = [];
      try {
        await producer.migrate();
        await worker.start();
        await sleep(500); // polled once, idle, LISTEN issued
        for (let i = 0; i < 7; i++) {
          await sleep(200 + Math.random() * 1_000); // a random phase against the default 1 s poll
          const t0 = performance.now();
          await producer.enqueue("t", { i });
          await until(() => startedAt.has(i), 5_000, `job ${i} started`);
          samples.push(startedAt.get(i)! - t0);
        }
      } finally {
        await worker.stop();
        await consumerAdapter.close();
        await producerAdapter.close();
      }
      p50[mode] = median(samples);
      console.log(`PgBouncer idle start latency (${mode === "poll" ? "default options: polling, pollMs 1000" : "listenConnectionString to the server"}): p50 ${p50[mode]!.toFixed(1)} ms; samples ${samples.map((s) => s.toFixed(1)).join(", ")} ms`);
    }
    expect(p50.poll!).toBeLessThan(1_500);
    expect(p50.listen!).toBeLessThan(150);
  }, 60_000);
});
