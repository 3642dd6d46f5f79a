import assert from "node:assert/strict";
import { Docket } from "../../../client/docket.ts";
import type { KyselyConformanceCase } from "../harness.ts";
import { StatementCounter } from "../statement-counter.ts";
import { LEASE_MS, claim, eventually, insert, newJob, token } from "../../conformance/helpers.ts";
import { handOff } from "../../conformance/hand-off.ts";

/** Statements (BEGIN and COMMIT included) a worker may send per job while it drains a backlog of unkeyed jobs. */
export const STATEMENTS_PER_JOB_BOUND = 2;

/**
 * A count, not a timing: a worker's claims and outcome writes are batched,
 * so in steady state the statements it sends per job stay under one bound
 * whatever its batch size (concurrency 10 and 50).
 */
export const statementCases: KyselyConformanceCase[] = [
  {
    name: "statements › a worker draining a backlog sends fewer than 2 statements per job, at concurrency 10 and 50 alike",
    slow: true,
    async run(t) {
      const perJob: number[] = [];
      for (const concurrency of [10, 50]) {
        const counter = new StatementCounter();
        const adapter = await t.connect({ instrument: { wrapDialect: (d) => counter.wrap(d) } });
        const d = new Docket({ adapter, retry: { baseMs: 5, jitter: 0 } });
        const jobs = 600;
        await new Docket({ adapter: t.adapter }).enqueueMany(Array.from({ length: jobs }, (_, i) => ({ task: `n${concurrency}`, payload: i })));
        let done = 0;
        let atLast = -1;
        const w = d.worker({
          concurrency,
          logger: null,
          handlers: { [`n${concurrency}`]: () => undefined },
          onEvent: (e) => {
            if (e.type === "succeeded" && ++done === jobs) atLast = counter.statements;
          },
        });
        counter.reset();
        await w.start();
        await eventually(async () => atLast >= 0, 30_000, `${jobs} jobs drained at concurrency ${concurrency}`);
        await w.stop();
        perJob.push(atLast / jobs);
      }
      const [c10, c50] = perJob as [number, number];
      assert.ok(c10 < STATEMENTS_PER_JOB_BOUND, `concurrency 10: ${c10.toFixed(2)} statements per job (bound ${STATEMENTS_PER_JOB_BOUND})`);
      assert.ok(c50 < STATEMENTS_PER_JOB_BOUND, `concurrency 50: ${c50.toFixed(2)} statements per job (bound ${STATEMENTS_PER_JOB_BOUND})`);
      console.log(`statements per job: concurrency 10 → ${c10.toFixed(2)}, concurrency 50 → ${c50.toFixed(2)}`);
    },
  },
];

/** Statements (BEGIN and COMMIT included) an enqueueMany of keyed jobs, or an outcome batch of keyed jobs, may send, whatever its jobs and keys (up to 500 keys). */
export const KEYED_BATCH_STATEMENTS_BOUND = 14;
/**
 * Statements one enqueue on a full key sends: the key's upsert (its lock), the holders' count and the INSERT,
 * in BEGIN … COMMIT (MariaDB adds the INSERT's read-back, SQLite the two busy_timeout pragmas around BEGIN IMMEDIATE).
 */
export const HOT_KEY_ENQUEUE_BOUND = 7;

/** The statements `fn` sends through a fresh connection of the case's adapter. */
async function counted(t: Parameters<KyselyConformanceCase["run"]>[0], fn: (d: Docket, adapter: Awaited<ReturnType<typeof t.connect>>) => Promise<void>): Promise<number> {
  const counter = new StatementCounter();
  const adapter = await t.connect({ instrument: { wrapDialect: (d) => counter.wrap(d) } });
  const d = new Docket({ adapter });
  await d.enqueue("warm", null); // the adapter's one-time reads (limits, capabilities) are not the batch's
  counter.reset();
  await fn(d, adapter);
  return counter.statements;
}

statementCases.push(
  {
    name: "statements › an enqueueMany of keyed jobs sends a bounded number of statements, whatever its jobs and keys (20 jobs on 10 keys, 1,000 on 200)",
    async run(t) {
      const counts: string[] = [];
      for (const [jobs, keys] of [
        [20, 10],
        [1000, 200],
      ] as const) {
        const n = await counted(t, async (d) => {
          const specs = Array.from({ length: jobs }, (_, i) => ({ task: "k", payload: i, options: { concurrency: { key: `key-${keys}-${i % keys}`, limit: 2 } } }));
          const made = await d.enqueueMany(specs);
          assert.equal(made.filter((j) => j.state === "ready").length, keys * 2, "two ready jobs per key, the rest blocked");
        });
        counts.push(`${jobs} jobs on ${keys} keys: ${n}`);
        assert.ok(n <= KEYED_BATCH_STATEMENTS_BOUND, `${jobs} jobs on ${keys} keys: ${n} statements (bound ${KEYED_BATCH_STATEMENTS_BOUND})`);
      }
      // One enqueue on a hot key (full, with blocked jobs): lock, count, insert, and the transaction's BEGIN and COMMIT.
      const hot = await counted(t, async (d) => {
        const made = await d.enqueue("k", "hot", { concurrency: { key: "key-200-0", limit: 2 } });
        assert.equal(made.state, "blocked");
      });
      counts.push(`one enqueue on a full key: ${hot}`);
      assert.ok(hot <= HOT_KEY_ENQUEUE_BOUND, `one enqueue on a full key: ${hot} statements (bound ${HOT_KEY_ENQUEUE_BOUND})`);
      console.log(`keyed enqueueMany statements: ${counts.join("; ")}`);
    },
  },
  {
    name: "statements › an outcome batch of keyed jobs frees and promotes their keys with a bounded number of statements (5 keys, 200 keys)",
    async run(t) {
      const counts: string[] = [];
      for (const keys of [5, 200]) {
        const seed = new Docket({ adapter: t.adapter });
        await seed.enqueueMany(Array.from({ length: keys * 2 }, (_, i) => ({ task: `s${keys}`, payload: i, options: { concurrency: { key: `s-${keys}-${i % keys}`, limit: 1 } } })));
        const now = Date.now();
        const running = await t.adapter.claim({ queues: ["default"], tasks: [`s${keys}`], limit: keys, now, leaseToken: `tok-${keys}`, leaseExpiresAt: now + 60_000 });
        assert.equal(running.length, keys);
        const n = await counted(t, async (_d, adapter) => {
          const settled = await adapter.settle({ items: running.map((j) => ({ kind: "complete" as const, id: j.id, leaseToken: j.leaseToken!, now, concurrencyKey: j.concurrencyKey })) });
          assert.equal(settled.filter((s) => s !== null).length, keys);
        });
        const ready = await t.adapter.list({ task: `s${keys}`, state: "ready", limit: 1000 });
        assert.equal(ready.length, keys, "each key's blocked job promoted");
        counts.push(`${keys} keys: ${n}`);
        assert.ok(n <= KEYED_BATCH_STATEMENTS_BOUND, `${keys} keys: ${n} statements (bound ${KEYED_BATCH_STATEMENTS_BOUND})`);
      }
      console.log(`keyed outcome batch statements: ${counts.join("; ")}`);
    },
  },
);

statementCases.push({
  name: "statements › where the engine can (PostgreSQL), a completion batch in a capped queue hands its slots to the next jobs in ONE statement; elsewhere it hands off nothing",
  async run(t) {
    const counter = new StatementCounter();
    const adapter = await t.connect({ instrument: { wrapDialect: (d) => counter.wrap(d) } });
    await adapter.setQueueControl({ queue: "q", maxRunning: 2 });
    for (let i = 0; i < 5; i++) await insert(t, { queue: "q" });
    const first = await claim(t, 10, adapter, ["q"]);
    assert.equal(first.length, 2);
    const now = t.clock.now();
    const items = first.map((j) => ({ kind: "complete" as const, id: j.id, leaseToken: j.leaseToken!, now, concurrencyKey: null }));
    counter.reset();
    const { settled, claimed } = await handOff(adapter, { items, handOff: { queues: ["q"], limit: 10, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS } });
    assert.deepEqual(settled.map((s) => s?.state), ["succeeded", "succeeded"]);
    // The kysely store offers settleAndHandOff only where its engine hands off in one statement.
    if (adapter.settleAndHandOff) {
      assert.deepEqual(claimed.map((j) => j.id), [first[1]!.id + 1, first[1]!.id + 2]);
      assert.equal(counter.statements, 1, "one statement completes the batch and claims the next jobs");
    } else assert.deepEqual(claimed, []);
  },
});

/**
 * Fan-in release (issue 26): a batch of parents' successes sends the same
 * number of statements whether they release one child each or share thirty
 * children of fan-in ten, and one release statement more than a batch of
 * parents whose children are already released or cancelled.
 */
statementCases.push({
  name: "statements › a batch of parents' successes releases their children in ONE statement, whatever the children (1 each, or 30 shared with fan-in 10)",
  async run(t) {
    const shapes = { one: 0, shared: 0, none: 0, childless: 0 };
    for (const shape of ["one", "shared", "none", "childless"] as const) {
      const now = t.clock.now();
      const task = `fan-${shape}`;
      const parents = await t.adapter.enqueue({ jobs: Array.from({ length: 10 }, () => newJob({ task, queue: "fan", runAt: now })), now });
      const ids = parents.map((p) => p.id);
      const children =
        shape === "one"
          ? ids.map((id) => newJob({ runAt: now, after: { ids: [id], refs: [] } }))
          : shape === "childless"
            ? []
            : Array.from({ length: 30 }, () => newJob({ runAt: now, after: { ids, refs: [] } }));
      const made = children.length === 0 ? [] : await t.adapter.enqueue({ jobs: children, now });
      // "none": the children are cancelled first, so the parents' successes find no waiting child to write.
      if (shape === "none") for (const c of made) assert.ok(await t.adapter.cancel({ id: c.id, now }));
      const running = await t.adapter.claim({ queues: ["fan"], tasks: [task], limit: 10, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
      assert.equal(running.length, 10);
      shapes[shape] = await counted(t, async (_d, adapter) => {
        await adapter.settle({ items: running.map((j) => ({ kind: "complete" as const, id: j.id, leaseToken: j.leaseToken!, now, concurrencyKey: null })) });
      });
      const left = await Promise.all(made.map((c) => t.adapter.get({ id: c.id })));
      if (shape !== "childless") assert.deepEqual([...new Set(left.map((c) => c?.state))], [shape === "none" ? "cancelled" : "scheduled"], `${shape}: every child released`);
    }
    console.log(
      `statements of a batch of 10 parents' successes: 1 child each ${shapes.one}, 30 shared children ${shapes.shared}, no waiting child ${shapes.none}; 10 jobs without children ${shapes.childless}`,
    );
    assert.equal(shapes.shared, shapes.one, "the statements do not grow with the children or the fan-in");
    assert.ok(shapes.one - shapes.none <= 1, `releasing adds at most one statement to the batch (${shapes.one} against ${shapes.none})`);
  },
});
