import assert from "node:assert/strict";
import type { DocketAdapter } from "../../core/adapter.ts";
import { Docket } from "../../client/docket.ts";
import type { JobRecord } from "../../core/job.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { claim, insert, newJob } from "./helpers.ts";
import { settleAndRead } from "../lease-writes.ts";

/** A job of `queue`/`task` that died now (claimed, then failed with no retry left). */
async function deadJob(t: CaseContext, queue = "default", task = "t"): Promise<JobRecord> {
  await insert(t, { queue, task });
  const [running] = await claim(t, 1, t.adapter, [queue]);
  assert.ok(running);
  const dead = await settleAndRead(t.adapter, { kind: "fail", id: running.id, leaseToken: running.leaseToken!, now: t.clock.now(), error: "boom", retryAt: null });
  assert.equal(dead?.state, "dead");
  return dead!;
}

/** `n` dead jobs at once: enqueued, then made dead by an admin write (the contract has no bulk path to dead). */
async function manyDead(t: CaseContext, n: number): Promise<number[]> {
  const now = t.clock.now();
  const ids: number[] = [];
  for (let i = 0; i < n; i += 500) {
    const jobs = Array.from({ length: Math.min(500, n - i) }, () => newJob({ runAt: now }));
    ids.push(...(await t.adapter.enqueue({ jobs, now })).map((j) => j.id));
  }
  await t.execute(`UPDATE {jobs} SET state = 'dead', attempt = 1, finished_at = ${now}, last_error = 'boom' WHERE state = 'ready'`);
  return ids;
}

async function states(t: CaseContext): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const j of await t.adapter.list({ limit: 100_000 })) out[j.state] = (out[j.state] ?? 0) + 1;
  return out;
}

const isInvalid = (e: { code?: string }) => e.code === "INVALID_ARGUMENT";

/** Bulk replay and purge of dead letters (R18, I9). */
export const deadLetterCases: ConformanceCase[] = [
  {
    name: "deadLetters › replayDead replays dead jobs that died by the cutoff, oldest death first, at most limit, of the queue and task asked, and nothing else",
    async run(t) {
      const first = await deadJob(t);
      t.clock.advance(10);
      const otherQueue = await deadJob(t, "q2");
      const otherTask = await deadJob(t, "default", "t2");
      t.clock.advance(10);
      const second = await deadJob(t);
      const third = await deadJob(t);
      const cutoff = t.clock.now();
      t.clock.advance(10);
      const late = await deadJob(t);
      const alive = await insert(t);
      const now = t.clock.advance(5);
      const got = await t.adapter.replayDead({ queue: "default", task: "t", diedBefore: cutoff, limit: 2, now });
      assert.deepEqual(got.map((j) => j.id), [first.id, second.id], "the two oldest deaths of default/t");
      for (const j of got) {
        assert.equal(j.state, "scheduled");
        assert.equal(j.attempt, 0);
        assert.equal(j.runAt, now);
        assert.equal(j.finishedAt, null);
        assert.equal(j.lastError, null);
      }
      assert.deepEqual((await t.adapter.replayDead({ queue: "default", task: "t", diedBefore: cutoff, limit: 10, now })).map((j) => j.id), [third.id]);
      assert.deepEqual(await t.adapter.replayDead({ queue: "default", task: "t", diedBefore: cutoff, limit: 10, now }), []);
      for (const kept of [otherQueue, otherTask, late]) assert.equal((await t.adapter.get({ id: kept.id }))?.state, "dead", `job ${kept.id} stays dead`);
      assert.equal((await t.adapter.get({ id: alive.id }))?.state, "ready");
      assert.deepEqual((await t.adapter.replayDead({ diedBefore: cutoff, limit: 10, now })).map((j) => j.id).sort((a, b) => a - b), [otherQueue.id, otherTask.id]);
    },
  },
  {
    name: "deadLetters › replayAll replays every job dead before the call, across batches, up to limit; the jobs run again",
    needs: ["sql"],
    async run(t) {
      const d = t.docket();
      await manyDead(t, 1100);
      t.clock.advance(1);
      assert.deepEqual(await d.deadLetters.replayAll({ limit: 700 }), { replayed: 700 });
      assert.deepEqual(await states(t), { scheduled: 700, dead: 400 });
      assert.deepEqual(await d.deadLetters.replayAll(), { replayed: 400 });
      assert.deepEqual(await d.deadLetters.replayAll(), { replayed: 0 });
      const [again] = await claim(t, 1);
      assert.equal(again?.attempt, 1, "a replayed job is claimed with a fresh attempt budget");
    },
  },
  {
    name: "deadLetters › concurrent replayAll calls on separate connections replay each dead job exactly once",
    needs: ["sql"],
    async run(t) {
      await manyDead(t, 1200);
      t.clock.advance(1);
      const adapters: DocketAdapter[] = [t.adapter, await t.connect(), await t.connect()];
      const results = await Promise.all(adapters.map((a) => new Docket({ adapter: a, clock: t.clock }).deadLetters.replayAll()));
      assert.equal(results.reduce((n, r) => n + r.replayed, 0), 1200, `counts ${JSON.stringify(results)} add up to the jobs`);
      assert.deepEqual(await states(t), { scheduled: 1200 });
    },
  },
  {
    name: "deadLetters › purge deletes dead jobs of the queue and task asked, older than olderThanMs, and nothing else",
    async run(t) {
      const d = t.docket();
      const old = await deadJob(t);
      const oldOther = await deadJob(t, "q2");
      t.clock.advance(60_000);
      const recent = await deadJob(t);
      const done = await insert(t);
      assert.deepEqual(await d.deadLetters.purge({ queue: "default", olderThanMs: 30_000 }), { deleted: 1 });
      assert.equal(await t.adapter.get({ id: old.id }), null);
      for (const kept of [oldOther, recent, done]) assert.ok(await t.adapter.get({ id: kept.id }), `job ${kept.id} is kept`);
      assert.deepEqual(await d.deadLetters.purge({ limit: 1 }), { deleted: 1 });
      assert.deepEqual(await d.deadLetters.purge(), { deleted: 1 });
      assert.deepEqual(await states(t), { ready: 1 });
    },
  },
  {
    name: "deadLetters › bad options to replayAll and purge are InvalidArgumentError and change nothing",
    async run(t) {
      const d = t.docket();
      const dead = await deadJob(t);
      const bad: unknown[] = [{ limit: 0 }, { limit: 1.5 }, { queue: "" }, { task: 7 }, { queues: ["x"] }, { olderThanMs: -1 }];
      for (const options of bad) {
        const o = options as never;
        if (!("olderThanMs" in (options as object))) await assert.rejects(d.deadLetters.replayAll(o), isInvalid, `replayAll ${JSON.stringify(options)}`);
        await assert.rejects(d.deadLetters.purge(o), isInvalid, `purge ${JSON.stringify(options)}`);
      }
      assert.equal((await t.adapter.get({ id: dead.id }))?.state, "dead");
    },
  },
];
