import assert from "node:assert/strict";
import type { DocketAdapter } from "../../../core/adapter.ts";
import { Docket } from "../../../client/docket.ts";
import type { ApplicationConnection, KyselyCaseContext as CaseContext, KyselyConformanceCase } from "../harness.ts";
import { LEASE_MS, eventually, sleep, token } from "../../conformance/helpers.ts";

class Rollback extends Error {}

/** Runs `fn` with the application's own kysely instance on the store, and a Docket on an adapter that works with it. */
async function withApplication(t: CaseContext, fn: (app: ApplicationConnection, d: Docket) => Promise<void>): Promise<void> {
  if (!t.store.application) throw new Error(`the ${t.adapter.name} target offers no application connection (TestStore.application)`);
  const app = await t.store.application();
  try {
    await app.db.schema.createTable(`${t.store.tablePrefix}orders`).ifNotExists().addColumn("id", "integer").execute();
    await fn(app, new Docket({ adapter: app.adapter, clock: t.clock }));
  } finally {
    await app.close();
  }
}

async function orders(t: CaseContext, app: ApplicationConnection): Promise<number> {
  return (await app.db.selectFrom(`${t.store.tablePrefix}orders`).selectAll().execute()).length;
}

/** R14: another connection never sees (or claims) a job of an open transaction, nor of one that rolled back; it sees it once committed. */
async function r14(t: CaseContext, mutate?: (adapter: DocketAdapter) => void): Promise<string | null> {
  let violation: string | null = null;
  await withApplication(t, async (app, d) => {
    mutate?.(app.adapter);
    const now = t.clock.now();
    const claimOther = () => t.adapter.claim({ queues: ["default"], limit: 10, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
    let id = 0;
    await app.db
      .transaction()
      .execute(async (trx) => {
        await trx.insertInto(`${t.store.tablePrefix}orders`).values({ id: 1 }).execute();
        id = (await d.enqueue("t", { order: 1 }, { transaction: trx })).id;
        if ((await t.adapter.get({ id })) !== null) violation ??= "the job was visible to another connection before the transaction committed";
        throw new Rollback();
      })
      .catch((error) => {
        if (!(error instanceof Rollback)) throw error;
      });
    if ((await claimOther()).length > 0) violation ??= "a job of a rolled-back transaction was claimed";
    if ((await t.adapter.get({ id })) !== null) violation ??= "the job of a rolled-back transaction exists";
    if ((await orders(t, app)) !== 0) violation ??= "the application's row of a rolled-back transaction exists";
    const committed = await app.db.transaction().execute(async (trx) => d.enqueue("t", { order: 2 }, { transaction: trx }));
    const [claimed] = await claimOther();
    if (claimed?.id !== committed.id) violation ??= `the committed job ${committed.id} was not claimable (got ${claimed?.id})`;
  });
  return violation;
}

/** Enqueue in the caller's own kysely transaction (R14): its jobs exist, and are admitted and claimed, if and only if it commits; anything else passed as `transaction` is refused before a write. */
export const transactionCases: KyselyConformanceCase[] = [
  {
    name: "transaction › R14: a job enqueued in the application's own transaction exists, and is claimed, if and only if it commits",
    needs: ["sql"],
    async run(t) {
      assert.equal(await r14(t), null);
    },
  },
  {
    name: "transaction › R14 is caught when the enqueue ignores the caller's transaction (engines with row locks)",
    needs: ["sql"],
    async run(t) {
      // On a single-writer engine (SQLite) the application shares docket's connection: an enqueue that ignored the
      // transaction would still run inside it, or wait for it; there is nothing to catch there.
      if (t.adapter.capabilities?.rowLocks !== true) return;
      const violation = await r14(t, (adapter) => {
        const enqueue = adapter.enqueue.bind(adapter);
        adapter.enqueue = ({ transaction: _ignored, ...params }) => enqueue(params);
      });
      assert.notEqual(violation, null, "R14: the scenario did not detect the enqueue outside the caller's transaction");
    },
  },
  {
    name: "transaction › keyed and idempotent jobs in the caller's transaction: admitted under the key's lock in it, and all or nothing with it",
    needs: ["sql"],
    async run(t) {
      await withApplication(t, async (app, d) => {
        const concurrency = { key: "acct", limit: 1 };
        const items = [0, 1, 2].map((i) => ({ task: "t", payload: { i }, options: { concurrency, ...(i === 0 ? { idempotencyKey: "first" } : {}) } }));
        await app.db
          .transaction()
          .execute(async (trx) => {
            const jobs = await d.enqueueMany(items, { transaction: trx });
            assert.deepEqual(jobs.map((j) => j.state), ["ready", "blocked", "blocked"]);
            throw new Rollback();
          })
          .catch((error) => assert.ok(error instanceof Rollback));
        assert.equal((await t.adapter.list({ limit: 100 })).length, 0, "nothing of the rolled-back batch");
        const jobs = await app.db.transaction().execute((trx) => d.enqueueMany(items, { transaction: trx }));
        assert.deepEqual(jobs.map((j) => [j.state, j.created]), [["ready", true], ["blocked", true], ["blocked", true]]);
        const again = await d.enqueue("t", {}, { idempotencyKey: "first", concurrency });
        assert.equal(again.created, false);
        assert.equal(again.id, jobs[0]!.id);
      });
    },
  },
  {
    name: "transaction › an enqueueMany refused for an idempotency key of another task leaves none of its jobs in the caller's transaction, even if it commits",
    needs: ["sql"],
    async run(t) {
      await withApplication(t, async (app, d) => {
        const held = await d.enqueue("email.send", {}, { idempotencyKey: "k1" });
        const items = [
          { task: "report.build", payload: { i: 0 }, options: { idempotencyKey: "k2", concurrency: { key: "acct", limit: 1 } } },
          { task: "report.build", payload: { i: 1 } },
          { task: "report.build", payload: { i: 2 }, options: { idempotencyKey: "k1" } },
        ];
        await app.db.transaction().execute(async (trx) => {
          await assert.rejects(d.enqueueMany(items, { transaction: trx }), (e: { code?: string }) => e.code === "IDEMPOTENCY_CONFLICT");
          await trx.insertInto(`${t.store.tablePrefix}orders`).values({ id: 1 }).execute();
        });
        assert.equal(await orders(t, app), 1, "the caller's transaction committed");
        assert.deepEqual((await t.adapter.list({ limit: 100 })).map((j) => j.id), [held.id], "none of the refused batch's jobs");
      });
    },
  },
  {
    name: "transaction › a worker does not start a job of an open transaction; it starts it once the transaction commits",
    needs: ["sql"],
    slow: true,
    async run(t) {
      await withApplication(t, async (app) => {
        const d = new Docket({ adapter: app.adapter });
        const started: number[] = [];
        const worker = d.worker({ pollMs: 20, logger: null, handlers: { t: (_p, ctx) => void started.push(ctx.job.id) } });
        await worker.start();
        try {
          let id = 0;
          await app.db.transaction().execute(async (trx) => {
            id = (await d.enqueue("t", {}, { transaction: trx })).id;
            await sleep(200);
            assert.deepEqual(started, [], "not started while the transaction is open");
          });
          await eventually(async () => started.includes(id), 10_000, "the committed job started");
        } finally {
          await worker.stop();
        }
      });
    },
  },
  {
    name: "transaction › a transaction option that is not an open transaction is InvalidArgumentError and writes nothing",
    needs: ["sql"],
    async run(t) {
      await withApplication(t, async (app, d) => {
        const isInvalid = (e: { code?: string }) => e.code === "INVALID_ARGUMENT";
        for (const transaction of [5, {}, app.db]) {
          await assert.rejects(d.enqueue("t", {}, { transaction: transaction as object }), isInvalid, String(transaction));
        }
        await assert.rejects(d.enqueueMany([{ task: "t", payload: {}, options: { transaction: {} } as never }]), isInvalid, "transaction inside an item");
        await assert.rejects(d.enqueueMany([{ task: "t", payload: {} }], { transaction: {}, extra: 1 } as never), isInvalid);
        assert.equal((await t.adapter.list({ limit: 10 })).length, 0);
      });
    },
  },
  {
    name: "transaction › a pool, or a connection with no transaction open, is INVALID_ARGUMENT before anything is written (nine keyed enqueues under limit 1 store nothing)",
    needs: ["sql"],
    async run(t) {
      await withApplication(t, async (app, d) => {
        if (!app.outsideTransaction) throw new Error(`the ${t.adapter.name} target offers no handles outside a transaction (ApplicationConnection.outsideTransaction)`);
        // Nine concurrent enqueues under one key of limit 1: taken outside a transaction, the key's lock would
        // last one statement, and several jobs would be admitted as ready.
        const attempt = async (label: string, transaction: object) => {
          const concurrency = { key: "acct", limit: 1 };
          const outcomes = await Promise.allSettled(Array.from({ length: 9 }, (_, i) => d.enqueue("t", { i }, { transaction, concurrency })));
          const isRefusal = (o: PromiseSettledResult<unknown>) => o.status === "rejected" && (o.reason as { code?: string }).code === "INVALID_ARGUMENT";
          const refused = outcomes.filter(isRefusal).length;
          const other = outcomes.find((o) => !isRefusal(o));
          const stored = (await t.adapter.list({ limit: 100 })).map((j) => j.state);
          const detail = other === undefined ? "" : other.status === "fulfilled" ? " (one was accepted)" : ` (${String(other.reason)})`;
          assert.deepEqual({ refused, stored }, { refused: 9, stored: [] }, `${label}${detail}`);
        };
        const borrowed = await app.outsideTransaction();
        try {
          for (const [label, handle] of borrowed.handles) await attempt(label, handle);
        } finally {
          await borrowed.release();
        }
        await app.db.connection().execute((connection) => attempt("a kysely connection outside a transaction", connection));
      });
    },
  },
];
