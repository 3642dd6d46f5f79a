import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import { JOB_STATES } from "../../core/states.ts";
import type { ConformanceCase } from "../harness.ts";
import { claimOne, jobInState } from "./helpers.ts";

const code = (e: unknown) => (e as { code?: string }).code;

/** An operator's actions on one job (Docket.runNow, Docket.deleteJob): what each moves, and what it refuses while writing nothing. */
export const jobActionCases: ConformanceCase[] = [
  {
    name: "list › concurrencyKey: a key's holders and blocked jobs, in id order, with the other filters; a bad key is InvalidArgumentError",
    async run(t) {
      const d = new Docket({ adapter: t.adapter, clock: t.clock });
      const a = await d.enqueue("t", {}, { concurrency: { key: "k1", limit: 1 } });
      await d.enqueue("t", {}, { concurrency: { key: "k2", limit: 1 } });
      const b = await d.enqueue("t", {}, { concurrency: { key: "k1", limit: 1 } });
      await d.enqueue("t", {});
      assert.deepEqual((await d.list({ concurrencyKey: "k1" })).map((j) => [j.id, j.state]), [[a.id, "ready"], [b.id, "blocked"]]);
      assert.deepEqual((await d.list({ concurrencyKey: "k1", state: "blocked" })).map((j) => j.id), [b.id]);
      assert.deepEqual((await d.list({ concurrencyKey: "k1", afterId: a.id })).map((j) => j.id), [b.id]);
      assert.deepEqual(await d.list({ concurrencyKey: "none-such" }), []);
      await assert.rejects(d.list({ concurrencyKey: "" }), (e) => code(e) === "INVALID_ARGUMENT");
    },
  },
  {
    name: "claim › stamps startedAt with the claim's time on every attempt; null before the first; kept when the job finishes",
    async run(t) {
      const d = new Docket({ adapter: t.adapter, clock: t.clock });
      const job = await d.enqueue("t", {}, { maxAttempts: 2 });
      assert.equal(job.startedAt, null);
      const first = await claimOne(t);
      assert.equal(first.startedAt, t.clock.now());
      assert.equal((await d.get(job.id))!.startedAt, t.clock.now(), "as stored");
      const firstAt = t.clock.now();
      t.clock.advance(500);
      await t.adapter.settle({ items: [{ kind: "fail", id: first.id, leaseToken: first.leaseToken!, now: t.clock.now(), error: "e", retryAt: t.clock.now() }] });
      assert.equal((await d.get(job.id))!.startedAt, firstAt, "a retry waiting keeps its last attempt's start");
      t.clock.advance(1_000);
      const second = await claimOne(t);
      assert.equal(second.startedAt, t.clock.now());
      const secondAt = t.clock.now();
      t.clock.advance(250);
      await t.adapter.settle({ items: [{ kind: "complete", id: second.id, leaseToken: second.leaseToken!, now: t.clock.now() }] });
      const done = (await d.get(job.id))!;
      assert.deepEqual([done.state, done.startedAt, done.finishedAt! - done.startedAt!], ["succeeded", secondAt, 250]);
    },
  },
  {
    name: "job actions › runNow makes a delayed or retrying job due now, attempts kept; the next claim takes it",
    async run(t) {
      const d = new Docket({ adapter: t.adapter, clock: t.clock });
      const delayed = await d.enqueue("t", { n: 1 }, { delay: 60_000 });
      const moved = await d.runNow(delayed.id);
      assert.equal(moved.state, "scheduled");
      assert.equal(moved.runAt, t.clock.now());
      assert.equal((await claimOne(t)).id, delayed.id, "the next claim stages and takes it");
      const retrying = await d.enqueue("t", { n: 2 }, { maxAttempts: 3 });
      const run = await claimOne(t);
      assert.equal(run.id, retrying.id);
      await t.adapter.settle({ items: [{ kind: "fail", id: run.id, leaseToken: run.leaseToken!, now: t.clock.now(), error: "boom", retryAt: t.clock.now() + 3_600_000 }] });
      const again = await d.runNow(retrying.id);
      assert.equal(again.attempt, 1, "the failed attempt still counts");
      assert.equal(again.lastError, "boom");
      assert.equal((await claimOne(t)).attempt, 2);
    },
  },
  {
    name: "job actions › runNow refuses every state but scheduled (InvalidStateError) and an unknown id (NotFoundError), changing nothing",
    async run(t) {
      const d = new Docket({ adapter: t.adapter, clock: t.clock });
      for (const state of JOB_STATES.filter((s) => s !== "scheduled")) {
        const job = await jobInState(t, state);
        const before = await t.adapter.get({ id: job.id });
        await assert.rejects(d.runNow(job.id), (e) => code(e) === "INVALID_STATE" && new RegExp(`it is ${state}`).test((e as Error).message));
        assert.deepEqual(await t.adapter.get({ id: job.id }), before, `a ${state} job is unchanged`);
      }
      await assert.rejects(d.runNow(999_999), (e) => code(e) === "NOT_FOUND");
      await assert.rejects(d.runNow(0), (e) => code(e) === "INVALID_ARGUMENT");
    },
  },
  {
    name: "job actions › deleteJob deletes a succeeded, cancelled or dead job; refuses a live one and an unknown id, deleting nothing",
    async run(t) {
      const d = new Docket({ adapter: t.adapter, clock: t.clock });
      for (const state of JOB_STATES) {
        const job = await jobInState(t, state);
        if (state === "succeeded" || state === "cancelled" || state === "dead") {
          await d.deleteJob(job.id);
          assert.equal(await t.adapter.get({ id: job.id }), null, `the ${state} job is gone`);
          await assert.rejects(d.deleteJob(job.id), (e) => code(e) === "NOT_FOUND", "a second delete finds nothing");
        } else {
          const before = await t.adapter.get({ id: job.id });
          await assert.rejects(d.deleteJob(job.id), (e) => code(e) === "INVALID_STATE");
          assert.deepEqual(await t.adapter.get({ id: job.id }), before, `a ${state} job is kept`);
        }
      }
      await assert.rejects(d.deleteJob(-1), (e) => code(e) === "INVALID_ARGUMENT");
    },
  },
  {
    name: "job actions › concurrent deletes of one finished job from separate connections: one deletes, the other gets NotFoundError",
    async run(t) {
      const job = await jobInState(t, "dead");
      const dockets = [new Docket({ adapter: t.adapter, clock: t.clock }), new Docket({ adapter: await t.connect(), clock: t.clock })];
      const results = await Promise.allSettled(dockets.map((d) => d.deleteJob(job.id)));
      const won = results.filter((r) => r.status === "fulfilled").length;
      assert.equal(won, 1, `one delete wins: ${JSON.stringify(results.map((r) => r.status === "rejected" && code(r.reason)))}`);
      for (const r of results) if (r.status === "rejected") assert.equal(code(r.reason), "NOT_FOUND", String(r.reason));
      assert.equal(await t.adapter.get({ id: job.id }), null);
    },
  },
];
