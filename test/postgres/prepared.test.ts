import type { Pool, PoolClient } from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import { Docket, InvalidArgumentError } from "../../src/index.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../support/targets.ts";
import { until } from "../support/until.ts";
import { pgLiteral, recordingPostgresAdapter } from "../support/sent-statements.ts";

const pg = (await import("pg")).default;
const created = await createPgTestDatabase("docket_prepared", "the postgres prepared-statement tests");
const url = created?.url ?? null;
afterAll(async () => {
  if (created) await dropPgDatabase(PG_URL, created.database);
});

/** A pool whose clients record every statement they are sent, and the name it ran under (null: unnamed). */
function recordingPool(max: number): { pool: Pool; sent: { text: string; name: string | null }[] } {
  const pool = new pg.Pool({ connectionString: url!, max });
  pool.on("error", () => undefined);
  const sent: { text: string; name: string | null }[] = [];
  const seen = new WeakSet<PoolClient>();
  const connect = pool.connect.bind(pool) as () => Promise<PoolClient>;
  (pool as unknown as { connect: () => Promise<PoolClient> }).connect = async () => {
    const client = await connect();
    if (!seen.has(client)) {
      seen.add(client);
      const query = client.query.bind(client) as (...a: unknown[]) => unknown;
      (client as unknown as { query: (...a: unknown[]) => unknown }).query = (first: unknown, ...rest: unknown[]) => {
        if (typeof first === "string") sent.push({ text: first, name: null });
        else if (first && typeof (first as { text?: unknown }).text === "string") {
          const c = first as { text: string; name?: string };
          sent.push({ text: c.text, name: c.name ?? null });
        }
        return query(first, ...rest);
      };
    }
    return client;
  };
  return { pool, sent };
}

/** Enqueues one job and runs it to success with a worker; returns what the pool was sent meanwhile. */
async function runOne(docket: Docket, sent: { text: string; name: string | null }[]): Promise<{ text: string; name: string | null }[]> {
  sent.length = 0;
  const job = await docket.enqueue("t", { n: 1 });
  const w = docket.worker({ handlers: { t: () => undefined }, logger: null });
  await w.start();
  await until(async () => (await docket.get(job.id))?.state === "succeeded", 5_000, "the job succeeded");
  await w.stop();
  return [...sent];
}

/**
 * Start latency: on PostgreSQL the statements docket runs again and
 * again are named statements, parsed and planned once per connection, as
 * graphile-worker's are; `preparedStatements: false` sends every one unnamed.
 */
describe.skipIf(!url)("postgres: named statements", () => {
  it("a single enqueue runs as a named statement, the claim and the completion unnamed (planned at each run: plans.test.ts); with preparedStatements: false nothing is named", async () => {
    for (const preparedStatements of [true, false]) {
      const { pool, sent } = recordingPool(2);
      const adapter = postgresAdapter({ pool: pool as never, tablePrefix: `p${Number(preparedStatements)}_`, preparedStatements });
      try {
        const docket = new Docket({ adapter });
        await docket.migrate();
        const named = (await runOne(docket, sent)).filter((s) => s.name !== null);
        const kinds = {
          enqueue: named.some((s) => /^with "inserted" as \(insert into/i.test(s.text) || /^insert into/i.test(s.text)),
          claim: named.some((s) => /for update skip locked/i.test(s.text) && /^with/i.test(s.text)),
          completion: named.some((s) => /^update/i.test(s.text) && /"lease_token" = \$/.test(s.text)),
        };
        expect(kinds).toEqual(preparedStatements ? { enqueue: true, claim: false, completion: false } : { enqueue: false, claim: false, completion: false });
      } finally {
        await adapter.close();
        await pool.end();
      }
    }
  });

  it("after a migration adds a column under a named statement, the call still succeeds, and later calls run unnamed", async () => {
    const { pool, sent } = recordingPool(1);
    // Every enqueue carries its own notice (no window): each sends the one statement this test follows.
    const adapter = postgresAdapter({ pool: pool as never, tablePrefix: "pc_", instrument: { wrapEngine: (e) => ({ ...e, noticeWindowMs: 0 }) } });
    const admin = new pg.Client({ connectionString: url! });
    await admin.connect();
    const enqueues = () => sent.filter((s) => /^with "inserted" as \(insert into/i.test(s.text)).map((s) => s.name);
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      await docket.enqueue("t", { n: 1 });
      await docket.enqueue("t", { n: 2 }); // prepared on the pool's one connection
      const name = enqueues()[0]!;
      expect(enqueues()).toEqual([name, name]);
      // RETURNING * of the prepared enqueue has another shape now: PostgreSQL refuses the cached plan (0A000).
      await admin.query("ALTER TABLE pc_jobs ADD COLUMN added_later integer");
      sent.length = 0;
      const job = await docket.enqueue("t", { n: 3 });
      expect(enqueues()).toEqual([name, null]);
      expect((await docket.get(job.id))?.payload).toEqual({ n: 3 });
      sent.length = 0;
      await docket.enqueue("t", { n: 4 });
      expect(enqueues()).toEqual([null]);
    } finally {
      await admin.end();
      await adapter.close();
      await pool.end();
    }
  });

  it("a named statement missing on its connection (26000, as behind PgBouncer), inside docket's own transaction: the transaction runs again unnamed; one warning; nothing named afterwards", async () => {
    const { pool, sent } = recordingPool(1);
    const warned: string[] = [];
    const adapter = postgresAdapter({ pool: pool as never, tablePrefix: "pt_", logger: { warn: (m) => void warned.push(m) } });
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      // An enqueue with a concurrency key: one transaction (the key's limit, then the row), whose insert is named.
      const keyed = (n: number) => docket.enqueue("t", { n }, { concurrency: { key: "k", limit: 5 } });
      await keyed(0);
      expect(sent.some((s) => s.name !== null && /insert into/i.test(s.text))).toBe(true);
      // The connection forgets its statements; pg still sends "execute <name>" only.
      const client = await pool.connect();
      await client.query("DEALLOCATE ALL");
      client.release();
      sent.length = 0;
      // The transaction's named insert is refused: the transaction runs again unnamed.
      const job = await keyed(1);
      expect(sent.map((s) => s.text.toLowerCase()).filter((t) => t === "begin" || t === "commit" || t === "rollback")).toEqual(["begin", "rollback", "begin", "commit"]);
      expect((await docket.get(job.id))?.payload).toEqual({ n: 1 });
      expect(warned).toHaveLength(1);
      expect(warned[0]).toContain("postgresAdapter({ preparedStatements: false })");
      sent.length = 0;
      await docket.enqueue("t", { n: 3 });
      expect(sent.filter((s) => s.name !== null)).toEqual([]);
    } finally {
      await adapter.close();
      await pool.end();
    }
  });

  it("the claim's generic plan (the one a prepared statement may settle on) reads the claim index, not every ready job; so do those of a claim taking no keyed job or a few", async () => {
    const { adapter, sent: texts } = recordingPostgresAdapter(url!, "pg_");
    const admin = new pg.Client({ connectionString: url! });
    await admin.connect();
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      for (let i = 0; i < 5; i++) await docket.enqueueMany(Array.from({ length: 1000 }, () => ({ task: "t", payload: {} })));
      await docket.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ task: "t", payload: {}, options: { concurrency: { key: `k${i}`, limit: 1 } } })));
      await admin.query("ANALYZE pg_jobs");
      await admin.query("SET plan_cache_mode = force_generic_plan");
      for (const [i, constrainedLimit] of [undefined, 0, 5].entries()) {
        const now = Date.now();
        texts.length = 0;
        const limits = constrainedLimit === undefined ? {} : { constrainedLimit };
        expect(await adapter.claim({ queues: ["default"], limit: 100, ...limits, now, leaseToken: `tok${i}`, leaseExpiresAt: now + 30_000 })).toHaveLength(100);
        const claim = texts.find((t) => /for update skip locked/i.test(t.text))!;
        await admin.query(`PREPARE claim_plan${i} AS ${claim.text}`);
        await admin.query("BEGIN");
        const plan = (await admin.query(`EXPLAIN EXECUTE claim_plan${i}(${claim.values.map(pgLiteral).join(", ")})`)).rows.map((r) => r["QUERY PLAN"] as string).join("\n");
        await admin.query("ROLLBACK");
        expect(plan, plan).not.toMatch(/Seq Scan on pg_jobs|Bitmap Heap Scan on pg_jobs/);
        expect(plan, plan).toMatch(/Index (Only )?Scan using pg_jobs_claim/);
      }
    } finally {
      await admin.end();
      await adapter.close();
    }
  });

  it("a claim taking no keyed job reads the claim index in order also when keyed history makes unkeyed rows rare (custom plan)", async () => {
    const { adapter, sent: texts } = recordingPostgresAdapter(url!, "ph_");
    const admin = new pg.Client({ connectionString: url! });
    await admin.connect();
    try {
      const docket = new Docket({ adapter });
      await docket.migrate();
      const old = Date.now() - 86_400_000;
      const columns = "task, queue, payload, state, priority, run_at, attempt, max_attempts, created_at, updated_at, finished_at, concurrency_key";
      await admin.query(`INSERT INTO ph_jobs (${columns}) SELECT 'old', 'default', '{}', 'succeeded', 0, ${old}, 1, 3, ${old}, ${old}, ${old}, 'k' || (g % 100) FROM generate_series(1, 100000) g`);
      for (let i = 0; i < 5; i++) await docket.enqueueMany(Array.from({ length: 1000 }, () => ({ task: "t", payload: {} })));
      await admin.query("ANALYZE ph_jobs");
      const now = Date.now();
      texts.length = 0;
      expect(await adapter.claim({ queues: ["default"], limit: 100, constrainedLimit: 0, now, leaseToken: "tok", leaseExpiresAt: now + 30_000 })).toHaveLength(100);
      const claim = texts.find((t) => /for update skip locked/i.test(t.text))!;
      await admin.query(`PREPARE claim_unkeyed AS ${claim.text}`);
      await admin.query("SET plan_cache_mode = force_custom_plan");
      await admin.query("BEGIN");
      const plan = (await admin.query(`EXPLAIN EXECUTE claim_unkeyed(${claim.values.map(pgLiteral).join(", ")})`)).rows.map((r) => r["QUERY PLAN"] as string).join("\n");
      await admin.query("ROLLBACK");
      // With `concurrency_key IS NULL` PostgreSQL took 1 row in 20 to be unkeyed, and read and sorted every ready job.
      expect(plan, plan).not.toMatch(/Seq Scan on ph_jobs|Bitmap Heap Scan on ph_jobs/);
      expect(plan, plan).toMatch(/Index (Only )?Scan using ph_jobs_claim/);
    } finally {
      await admin.end();
      await adapter.close();
    }
  });

  it("preparedStatements must be a boolean; logger an object with warn, or null; listenConnectionString a non-empty string", () => {
    expect(() => postgresAdapter({ connectionString: url!, preparedStatements: "yes" as never })).toThrow(InvalidArgumentError);
    expect(() => postgresAdapter({ connectionString: url!, logger: (() => undefined) as never })).toThrow(InvalidArgumentError);
    expect(() => postgresAdapter({ connectionString: url!, listenConnectionString: "" })).toThrow(InvalidArgumentError);
    expect(() => postgresAdapter({ connectionString: url!, listenConnectionString: 5 as never })).toThrow(InvalidArgumentError);
  });
});
