import assert from "node:assert/strict";
import type { Kysely } from "kysely";
import type { DocketAdapter } from "../../../core/adapter.ts";
import { Docket } from "../../../client/docket.ts";
import { InvalidArgumentError, LeaseLostError, UnsupportedError } from "../../../core/errors.ts";
import type { ApplicationConnection, KyselyCaseContext as CaseContext, KyselyConformanceCase } from "../harness.ts";
import { LEASE_MS, insert, token } from "../../conformance/helpers.ts";
import { mutationById } from "../mutations.ts";

// deno-lint-ignore no-explicit-any
type AnyKysely = Kysely<any>;

/** The application's table of effects (one row per job whose handler wrote it), made empty; and a reader of its rows. */
async function effectsTable(t: CaseContext): Promise<{ name: string; rows: () => Promise<number[]>; close: () => Promise<void>; app: ApplicationConnection }> {
  if (!t.store.application) throw new Error(`the ${t.adapter.name} target offers no application connection (TestStore.application)`);
  const app = await t.store.application();
  const name = `${t.store.tablePrefix}effects`;
  await app.db.schema.createTable(name).ifNotExists().addColumn("job_id", "integer").execute();
  await app.db.deleteFrom(name).execute();
  return {
    name,
    rows: async () => ((await app.db.selectFrom(name).select("job_id").orderBy("job_id").execute()) as { job_id: number }[]).map((r) => Number(r.job_id)),
    close: () => app.close(),
    app,
  };
}

/** A `pg`-style client: what the `{ client }` form hands the handler. */
type PgLike = { query(text: string, values?: unknown[]): Promise<unknown>; getTransactionStatus?(): string | null };

/** Inserts the effect row of `jobId` through `handle`: a kysely transaction, or with `client` a pg-style client. */
async function writeEffect(effects: { name: string }, handle: object, jobId: number, client: boolean): Promise<void> {
  if (client) await (handle as PgLike).query(`insert into "${effects.name}" (job_id) values ($1)`, [jobId]);
  else await (handle as AnyKysely).insertInto(effects.name).values({ job_id: jobId }).execute();
}

/**
 * R24: the lease is lost between the handler's writes and the commit. Session
 * 1 (`stale`) opens the handler's transaction and writes the effect; then
 * the job's lease expires, a sweep retries it and session 2 claims it again
 * (on SQLite, whose writers take turns, all of that happens before the
 * transaction begins); then session 1's transaction records the success.
 * That must be refused and roll back the effect: the fresh attempt still
 * runs the job, and the effect table holds nothing. Returns the violation.
 * With `clientForm`, the transaction is the `{ client }` form on one of the
 * application's pg clients (PostgreSQL).
 */
async function r24(t: CaseContext, stale: DocketAdapter, clientForm = false): Promise<string | null> {
  const effects = await effectsTable(t);
  const lent = clientForm ? await effects.app.client!() : null;
  try {
    const job = await insert(t);
    const now = t.clock.now();
    const [first] = await stale.claim({ queues: ["default"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
    if (first?.id !== job.id) return "setup: the first attempt did not claim the job";
    const fresh = await t.connect();
    const reclaim = async () => {
      const later = t.clock.advance(LEASE_MS + 1);
      await new Docket({ adapter: fresh, clock: t.clock, retry: { baseMs: 0, jitter: 0 } }).reclaimExpired();
      const [again] = await fresh.claim({ queues: ["default"], limit: 1, now: later, leaseToken: token(), leaseExpiresAt: later + LEASE_MS });
      return again;
    };
    const serialWriters = !(stale as { capabilities?: { rowLocks?: boolean } }).capabilities?.rowLocks;
    const before = serialWriters ? await reclaim() : undefined;
    let again = before;
    let error: unknown = null;
    try {
      const work = async (trx: object) => {
        await writeEffect(effects, trx, job.id, lent !== null);
        if (!serialWriters) again = await reclaim();
        return '"done"';
      };
      await stale.completeInTransaction!({ id: job.id, leaseToken: first.leaseToken!, now }, work, lent ? { client: lent.client } : undefined);
    } catch (e) {
      error = e;
    }
    if (!again) return "setup: the job was not claimed again after its lease expired";
    const stored = await t.adapter.get({ id: job.id });
    const rows = await effects.rows();
    if (!(error instanceof LeaseLostError)) return `the stale attempt's transaction committed (${String(error)}): job ${stored?.state}, effects ${JSON.stringify(rows)}`;
    if (rows.length > 0) return `the stale attempt's effect survived its refused completion: ${JSON.stringify(rows)}`;
    if (stored?.state !== "running" || stored.leaseToken !== again.leaseToken) return `the fresh attempt lost the job: ${stored?.state} under ${stored?.leaseToken}`;
    return null;
  } finally {
    await lent?.release();
    await effects.close();
  }
}

/** `ctx.transaction` (completion in the handler's transaction, I16) on the SQL adapters, and R24 with its guard removed. */
export const handlerTransactionCases: KyselyConformanceCase[] = [
  {
    name: "ctx.transaction › the handler's writes and the job's success commit together; a throw rolls the writes back and the attempt fails; follow-ups enqueued with trx exist only if it commits",
    needs: ["sql"],
    async run(t) {
      const effects = await effectsTable(t);
      const d = new Docket({ adapter: t.adapter, retry: { baseMs: 0, jitter: 0 } });
      const errors: unknown[] = [];
      const w = d.worker({
        pollMs: 10,
        logger: null,
        handlers: {
          write: async (p, ctx) => {
            const { fail } = p as { fail: boolean };
            return ctx.transaction(async (trx: AnyKysely) => {
              await trx.insertInto(effects.name).values({ job_id: ctx.job.id }).execute();
              await d.enqueue("followUp", { of: ctx.job.id }, { transaction: trx });
              if (fail && ctx.job.attempt === 1) throw new Error("declined");
              return { wrote: ctx.job.id };
            });
          },
          twice: async (_p, ctx) => {
            await ctx.transaction(async () => 1);
            await ctx.transaction(async () => 2).catch((e) => void errors.push(e));
            throw new Error("after the commit: the job has succeeded already");
          },
          followUp: () => undefined,
        },
      });
      try {
        const ok = await d.enqueue("write", { fail: false });
        const retried = await d.enqueue("write", { fail: true }, { maxAttempts: 2 });
        const twice = await d.enqueue("twice", {});
        await w.start();
        const done = await d.waitFor(ok.id, { timeoutMs: 10_000, pollMs: 10 });
        assert.equal(done.state, "succeeded");
        assert.deepEqual(done.result, { wrote: ok.id });
        const second = await d.waitFor(retried.id, { timeoutMs: 10_000, pollMs: 10 });
        assert.equal(second.state, "succeeded");
        assert.equal(second.attempt, 2);
        assert.equal(second.errors[0]?.error.includes("declined"), true);
        const once = await d.waitFor(twice.id, { timeoutMs: 10_000, pollMs: 10 });
        assert.equal(once.state, "succeeded", "a throw after the transaction committed changes nothing");
        assert.equal(once.result, 1);
        assert.ok(errors[0] instanceof InvalidArgumentError, `a second ctx.transaction: ${String(errors[0])}`);
        assert.deepEqual(await effects.rows(), [ok.id, retried.id], "one row per succeeded job: the declined attempt's row rolled back");
        const followUps = await d.list({ task: "followUp" });
        assert.deepEqual(followUps.map((j) => (j.payload as { of: number }).of).sort((a, b) => a - b), [ok.id, retried.id], "the declined attempt's follow-up rolled back with it");
      } finally {
        await w.stop();
        await effects.close();
      }
    },
  },
  {
    name: "ctx.transaction › a call refused for its { client } before fn runs leaves the attempt's one call free; once the worker knows the lease lost (a cancel through its docket), neither ctx.transaction nor ctx.step runs fn",
    needs: ["sql"],
    async run(t) {
      const d = new Docket({ adapter: t.adapter });
      const refusals: unknown[] = [];
      const lostCalls: unknown[] = [];
      let ranAfterLoss = 0;
      let cancelled!: () => void;
      const signalSeen = new Promise<void>((r) => (cancelled = r));
      const w = d.worker({
        pollMs: 10,
        logger: null,
        handlers: {
          client: async (_p, ctx) => {
            // A non-client: INVALID_ARGUMENT on PostgreSQL, UNSUPPORTED elsewhere; either way refused before fn runs.
            await ctx.transaction(async () => "never", { client: {} }).catch((e) => void refusals.push(e));
            return ctx.transaction(async () => "committed");
          },
          lost: async (_p, ctx) => {
            await new Promise<void>((r) => (ctx.signal.aborted ? r() : ctx.signal.addEventListener("abort", () => r())));
            cancelled();
            await ctx.step("charge", () => void ranAfterLoss++).catch((e) => void lostCalls.push(e));
            await ctx.transaction(async () => void ranAfterLoss++).catch((e) => void lostCalls.push(e));
          },
        },
      });
      await w.start();
      try {
        const first = await d.enqueue("client", {});
        const done = await d.waitFor(first.id, { timeoutMs: 10_000, pollMs: 10 });
        assert.equal(refusals.length, 1);
        assert.ok(refusals[0] instanceof InvalidArgumentError || refusals[0] instanceof UnsupportedError, String(refusals[0]));
        assert.equal(done.state, "succeeded", `the second call completed the job (${done.lastError ?? ""})`);
        assert.equal(done.result, "committed");
        const second = await d.enqueue("lost", {});
        const started = Date.now();
        while ((await d.get(second.id))?.state !== "running" && Date.now() - started < 10_000) await new Promise((r) => setTimeout(r, 10));
        await d.cancel(second.id);
        await signalSeen;
        const until = Date.now() + 5_000;
        while (lostCalls.length < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
        assert.equal(ranAfterLoss, 0, "neither fn ran");
        assert.deepEqual(lostCalls.map((e) => e instanceof LeaseLostError), [true, true]);
      } finally {
        await w.stop();
      }
    },
  },
  {
    name: "ctx.transaction › bad options and a step without a function are INVALID_ARGUMENT before anything runs; a step or progress inside the transaction never hangs (recorded with row locks, INVALID_ARGUMENT where writers take turns); a transaction whose attempt timed out rolls back",
    needs: ["sql"],
    async run(t) {
      const effects = await effectsTable(t);
      const d = new Docket({ adapter: t.adapter, retry: { baseMs: 0, jitter: 0 } });
      const refused: unknown[] = [];
      const inside: unknown[] = [];
      let ranWithBadOptions = false;
      const w = d.worker({
        pollMs: 10,
        logger: null,
        handlers: {
          options: async (_p, ctx) => {
            for (const options of [{ clinet: {} }, "fast"]) {
              await ctx.transaction(async () => void (ranWithBadOptions = true), options as never).catch((e) => void refused.push(e));
            }
            await ctx.step("s", 5 as never).catch((e) => void refused.push(e));
            return ctx.step("s", () => 1);
          },
          inner: async (_p, ctx) =>
            ctx.transaction(async (trx: AnyKysely) => {
              await ctx.step("inner", () => 7).catch((e) => void inside.push(e));
              await ctx.progress({ half: true }).catch((e) => void inside.push(e));
              await trx.insertInto(effects.name).values({ job_id: ctx.job.id }).execute();
              return "ok";
            }),
          slow: async (_p, ctx) =>
            ctx.transaction(async (trx: AnyKysely) => {
              if (ctx.job.attempt === 1) await new Promise((r) => setTimeout(r, 600));
              await trx.insertInto(effects.name).values({ job_id: ctx.job.id }).execute();
              return ctx.job.attempt;
            }),
        },
      });
      try {
        const options = await d.enqueue("options", {});
        const inner = await d.enqueue("inner", {});
        const slow = await d.enqueue("slow", {}, { timeoutMs: 200, maxAttempts: 2 });
        await w.start();
        const o = await d.waitFor(options.id, { timeoutMs: 10_000, pollMs: 10 });
        assert.equal(o.state, "succeeded");
        assert.equal(o.result, 1, "the refused ctx.step left its name free");
        assert.equal(ranWithBadOptions, false, "fn ran with options it cannot honour");
        assert.equal(refused.length, 3);
        for (const e of refused) assert.ok(e instanceof InvalidArgumentError, String(e));
        assert.match(String(refused[0]), /clinet/);
        const i = await d.waitFor(inner.id, { timeoutMs: 10_000, pollMs: 10 });
        assert.equal(i.state, "succeeded");
        const rowLocks = (t.adapter as { capabilities?: { rowLocks?: boolean } }).capabilities?.rowLocks === true;
        if (rowLocks) {
          assert.deepEqual(inside, []);
          assert.deepEqual(i.steps.map((x) => x.name), ["inner"]);
        } else {
          assert.equal(inside.length, 2);
          for (const e of inside) assert.ok(e instanceof InvalidArgumentError && /inside ctx\.transaction/.test(e.message), String(e));
          assert.deepEqual(i.steps, []);
        }
        const s = await d.waitFor(slow.id, { timeoutMs: 10_000, pollMs: 10 });
        assert.equal(s.state, "succeeded");
        assert.equal(s.result, 2, "the timed-out attempt's transaction committed");
        assert.match(s.errors[0]?.error ?? "", /timed out/);
        assert.deepEqual(await effects.rows(), [inner.id, slow.id], "one effect row per succeeded job");
      } finally {
        await w.stop();
        await effects.close();
      }
    },
  },
  {
    name: "races › R24: the lease is lost between the handler's writes and the commit: the success is refused and the writes roll back",
    needs: ["sql"],
    async run(t) {
      assert.equal(await r24(t, await t.connect()), null);
    },
  },
  {
    name: "races › R24 is caught when the lease token in the completion's conditional write is removed",
    needs: ["sql"],
    async run(t) {
      const stale = await t.connect({ instrument: { plugins: mutationById("lease-token-unchecked").plugins!() } });
      assert.notEqual(await r24(t, stale), null, "R24: the scenario did not detect the removed guard");
    },
  },
  {
    name: "ctx.transaction › the { client } form: BEGIN … COMMIT on the handler's own pg client with its writes and the success together (PostgreSQL); a pool, a client inside BEGIN or a non-client is refused before anything runs; elsewhere the form is refused as unsupported",
    needs: ["sql"],
    async run(t) {
      const effects = await effectsTable(t);
      const d = new Docket({ adapter: t.adapter, retry: { baseMs: 0, jitter: 0 } });
      try {
        const job = await insert(t);
        const now = t.clock.now();
        const [claimed] = await t.adapter.claim({ queues: ["default"], limit: 1, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
        const fence = { id: job.id, leaseToken: claimed!.leaseToken!, now };
        let ran = 0;
        const work = async () => (ran++, null);
        if (!effects.app.client) {
          await assert.rejects(t.adapter.completeInTransaction!(fence, work, { client: {} }), UnsupportedError);
          assert.equal(ran, 0, "the refused form ran the work");
          assert.equal((await t.adapter.get({ id: job.id }))?.state, "running");
          return;
        }
        const outside = await effects.app.outsideTransaction!();
        const pool = outside.handles.find(([label]) => label.includes("pg.Pool"))!;
        await outside.release();
        const inside = await effects.app.client();
        try {
          await (inside.client as PgLike).query("BEGIN");
          for (const bad of [{}, pool[1], inside.client]) await assert.rejects(t.adapter.completeInTransaction!(fence, work, { client: bad }), InvalidArgumentError);
          assert.equal((inside.client as PgLike).getTransactionStatus?.(), "T", "a refusal touched the caller's open transaction");
          await (inside.client as PgLike).query("ROLLBACK");
        } finally {
          await inside.release();
        }
        assert.equal(ran, 0, "a refused client ran the work");
        assert.equal((await t.adapter.get({ id: job.id }))?.state, "running", "a refused client wrote the outcome");
        await d.cancel(job.id);

        const w = d.worker({
          pollMs: 10,
          logger: null,
          handlers: {
            write: async (p, ctx) => {
              const lent = await effects.app.client!();
              try {
                return await ctx.transaction(async (client: PgLike) => {
                  await writeEffect(effects, client, ctx.job.id, true);
                  await d.enqueue("followUp", { of: ctx.job.id }, { transaction: client });
                  if ((p as { fail: boolean }).fail && ctx.job.attempt === 1) throw new Error("declined");
                  return { wrote: ctx.job.id };
                }, { client: lent.client });
              } finally {
                await lent.release();
              }
            },
            followUp: () => undefined,
          },
        });
        try {
          const ok = await d.enqueue("write", { fail: false });
          const retried = await d.enqueue("write", { fail: true }, { maxAttempts: 2 });
          await w.start();
          const done = await d.waitFor(ok.id, { timeoutMs: 10_000, pollMs: 10 });
          assert.deepEqual([done.state, done.result], ["succeeded", { wrote: ok.id }]);
          const second = await d.waitFor(retried.id, { timeoutMs: 10_000, pollMs: 10 });
          assert.deepEqual([second.state, second.attempt], ["succeeded", 2]);
          assert.deepEqual(await effects.rows(), [ok.id, retried.id], "one row per succeeded job: the declined attempt's row rolled back");
          const followUps = await d.list({ task: "followUp" });
          assert.deepEqual(followUps.map((j) => (j.payload as { of: number }).of).sort((a, b) => a - b), [ok.id, retried.id], "the declined attempt's follow-up rolled back with it");
        } finally {
          await w.stop();
        }
      } finally {
        await effects.close();
      }
    },
  },
  {
    name: "races › R24 in the { client } form (PostgreSQL): the success is refused and the client's writes roll back; caught when the lease token is removed",
    needs: ["sql"],
    async run(t) {
      const app = await t.store.application!();
      const offered = app.client !== undefined;
      await app.close();
      if (!offered) return;
      assert.equal(await r24(t, await t.connect(), true), null);
      const stale = await t.connect({ instrument: { plugins: mutationById("lease-token-unchecked").plugins!() } });
      assert.notEqual(await r24(t, stale, true), null, "R24 ({ client }): the scenario did not detect the removed guard");
    },
  },
  {
    name: "ctx.transaction › a heartbeat between the commit and the handler's return does not report the attempt lost: the job's succeeded event is emitted",
    needs: ["sql"],
    async run(t) {
      const d = new Docket({ adapter: t.adapter });
      const events: string[] = [];
      const w = d.worker({
        pollMs: 10,
        leaseMs: 600,
        heartbeatMs: 50,
        logger: null,
        onEvent: (e) => void ((e.type === "lost" || e.type === "succeeded") && events.push(e.type)),
        handlers: {
          slowAfter: async (_p, ctx) => {
            await ctx.transaction(async () => "done");
            await new Promise((r) => setTimeout(r, 300)); // several heartbeats after the commit
          },
        },
      });
      try {
        const job = await d.enqueue("slowAfter", {});
        await w.start();
        assert.equal((await d.waitFor(job.id, { timeoutMs: 10_000, pollMs: 10 })).state, "succeeded");
        for (let i = 0; i < 100 && events.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
        await new Promise((r) => setTimeout(r, 400));
        assert.deepEqual(events, ["succeeded"]);
      } finally {
        await w.stop();
      }
    },
  },
];
