import { afterAll, describe, expect, it } from "vitest";
import type { CompiledQuery, DatabaseConnection, Dialect, Driver } from "kysely";
import { mysqlAdapter } from "../../src/adapters/mysql/index.ts";
import { mysqlEngine } from "../../src/adapters/mysql/mysql-engine.ts";
import type { DocketAdapter } from "../../src/core/adapter.ts";
import { Docket } from "../../src/index.ts";
import { StatementHook } from "../../src/testing/kysely/statement-hook.ts";
import { tapDialect } from "../../src/testing/kysely/tapped-driver.ts";
import { createMysqlTestDatabase, dropMysqlDatabase } from "../support/targets.ts";

const created = await createMysqlTestDatabase("docket_fair_enqueue", "the MariaDB fair enqueue tests");
const url = created?.url ?? null;
afterAll(async () => {
  if (created) await dropMysqlDatabase(created.database);
});

/** The key upsert's advance of its last tag (fair-enqueue.ts, fairness.ts), as MariaDB receives it. */
const ADVANCE = "greatest(served + values(used), values(served))";

/** `dialect` with the key upsert's advance removed (the mutant): the key's last tag is set to the clock's place, not moved past its last. */
function withoutAdvance(dialect: Dialect): Dialect {
  return {
    createAdapter: () => dialect.createAdapter(),
    createIntrospector: (db) => dialect.createIntrospector(db),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createDriver: (): Driver => {
      const inner = dialect.createDriver();
      return {
        init: () => inner.init(),
        acquireConnection: async () => {
          const raw = await inner.acquireConnection();
          const conn: DatabaseConnection = {
            executeQuery: (c: CompiledQuery) => raw.executeQuery({ ...c, sql: c.sql.replace(ADVANCE, "values(served)") }),
            streamQuery: (c, n) => raw.streamQuery(c, n),
          };
          return Object.assign(conn, { raw });
        },
        beginTransaction: (c, s) => inner.beginTransaction((c as unknown as { raw: DatabaseConnection }).raw, s),
        commitTransaction: (c) => inner.commitTransaction((c as unknown as { raw: DatabaseConnection }).raw),
        rollbackTransaction: (c) => inner.rollbackTransaction((c as unknown as { raw: DatabaseConnection }).raw),
        releaseConnection: (c) => inner.releaseConnection((c as unknown as { raw: DatabaseConnection }).raw),
        destroy: () => inner.destroy(),
      };
    },
  };
}

let prefixes = 0;

/**
 * R21 on the two-statement fair enqueue (fair-enqueue.ts
 * `insertOneFairUpserted`: MariaDB 10.5+, one job of a queue the store
 * knows fair, outside a caller's transaction): session 1 is held after its
 * key upsert returned, before its job's INSERT, while session 2 enqueues a
 * job of the same key. Each upsert advances the key's last tag and returns
 * it in one statement, so the two jobs get successive places: the key's
 * jobs are served in two rounds, another key's job between them.
 */
async function race(mutant: boolean): Promise<{ order: string[]; statements: string[] }> {
  const prefix = `fe${++prefixes}_`;
  const hook = new StatementHook({ name: "fair enqueue R21" });
  const statements: string[] = [];
  const wrap = (d: Dialect) => (mutant ? withoutAdvance(d) : d);
  const s1 = mysqlAdapter({ uri: url!, tablePrefix: prefix, instrument: { wrapDialect: (d) => hook.wrap(tapDialect(wrap(d), { query: (sql) => void statements.push(sql), control: (k) => void statements.push(k) })) } });
  const s2 = mysqlAdapter({ uri: url!, tablePrefix: prefix, instrument: { wrapDialect: wrap } });
  const adapters: DocketAdapter[] = [s1, s2];
  try {
    const [d1, d2] = [new Docket({ adapter: s1 }), new Docket({ adapter: s2 })];
    await d1.migrate();
    // Each store learns the queue fair (its first fair enqueue marks or reads it); the flood key then holds 20 jobs.
    await d1.enqueue("t", null, { queue: "q", fairness: { key: "flood" } });
    await d2.enqueue("t", null, { queue: "q", fairness: { key: "flood" } });
    await d2.enqueueMany(Array.from({ length: 18 }, () => ({ task: "t", payload: null, options: { queue: "q", fairness: { key: "flood" } } })));
    statements.length = 0;
    const held = hook.holdNext("enqueue");
    const one = d1.enqueue("t", 1, { queue: "q", fairness: { key: "x" } });
    await held.reached;
    await d2.enqueue("t", 2, { queue: "q", fairness: { key: "x" } });
    held.release();
    await one;
    const sent = [...statements];
    const order: string[] = [];
    for (let i = 0; i < 22 && order.filter((k) => k === "x").length < 2; i++) {
      const [job] = await s2.claim({ queues: ["q"], limit: 1, now: Date.now(), leaseToken: `l${i}`, leaseExpiresAt: Date.now() + 60_000 });
      order.push(job?.fairKey ?? "-");
    }
    return { order, statements: sent };
  } finally {
    for (const a of adapters) await a.close();
  }
}

describe.skipIf(!url)("mysql: a fair job enqueued alone", () => {
  it("is stored in two autocommit statements (the key's upsert RETURNING its last tag, the job's INSERT), no BEGIN or COMMIT", async () => {
    const { statements } = await race(false);
    // (A read of the queue's clock may come first, when the one this store read is older than FAIR_CLOCK_TTL_MS.)
    const kinds = statements.filter((s) => !/^\s*select min\(`fair_tag`\)/.test(s)).map((s) => (/^\s*insert into `fe\d+_fair_keys`/.test(s) ? "upsert" : /^\s*insert into `fe\d+_jobs`/.test(s) ? "insert" : s.slice(0, 30)));
    expect(kinds).toEqual(["upsert", "insert"]);
  });

  it("R21: two enqueues of one key at one instant get successive places, another key's job served between them (and not when the upsert's advance is removed)", async () => {
    const { order } = await race(false);
    const between = (o: string[]) => o.slice(o.indexOf("x") + 1, o.lastIndexOf("x")).length;
    expect(order.filter((k) => k === "x").length).toBe(2);
    expect(between(order), JSON.stringify(order)).toBeGreaterThan(0);
    const mutated = await race(true);
    expect(between(mutated.order), `mutant: ${JSON.stringify(mutated.order)}`).toBe(0);
  });

  it("4 stores enqueueing 40 jobs each at once, on 5 keys none of them has yet, store every job, each key's with distinct tags", async () => {
    const prefix = `fe${++prefixes}_`;
    const stores = Array.from({ length: 4 }, () => mysqlAdapter({ uri: url!, tablePrefix: prefix, connectionLimit: 10 }));
    try {
      const dockets = stores.map((adapter) => new Docket({ adapter }));
      await dockets[0]!.migrate();
      for (const d of dockets) await d.enqueue("t", null, { queue: "q", fairness: { key: "warm" } });
      const all = await Promise.all(dockets.flatMap((d, s) => Array.from({ length: 40 }, (_, i) => d.enqueue("t", { s, i }, { queue: "q", fairness: { key: `new${i % 5}` } }))));
      expect(all.every((j) => j.created)).toBe(true);
      const pool = (await import("mysql2/promise")).default.createPool({ uri: url! });
      const [rows] = await pool.query(`select fair_key as k, count(*) as n, count(distinct fair_tag) as tags from ${prefix}jobs where fair_key like 'new%' group by fair_key order by fair_key`);
      await pool.end();
      expect((rows as { k: string; n: number; tags: number }[]).map((r) => `${r.k}:${Number(r.n)}/${Number(r.tags)}`).join(" ")).toBe("new0:32/32 new1:32/32 new2:32/32 new3:32/32 new4:32/32");
    } finally {
      for (const a of stores) await a.close();
    }
  });
});

describe("mysql engine: retriedStatement", () => {
  it("runs a statement again after a deadlock or lock wait timeout (up to the transaction's tries), never after another error", async () => {
    const engine = mysqlEngine({ prefix: "x_" });
    let calls = 0;
    const lost = (errno: number) => Object.assign(new Error(`errno ${errno}`), { errno });
    const twice = await engine.retriedStatement!(null as never, async () => {
      if (++calls <= 2) throw lost(calls === 1 ? 1213 : 1205);
      return "done";
    });
    expect([twice, calls]).toEqual(["done", 3]);
    // A statement that always fails with `errno`: the error it ends with, and how many times it ran.
    const alwaysFailing = async (errno: number) => {
      let runs = 0;
      const error = await engine.retriedStatement!(null as never, async () => {
        runs++;
        throw lost(errno);
      }).catch((e: Error) => e.message);
      return [error, runs];
    };
    expect(await alwaysFailing(1062)).toEqual(["errno 1062", 1]);
    expect(await alwaysFailing(1213)).toEqual(["errno 1213", 5]);
  });
});
