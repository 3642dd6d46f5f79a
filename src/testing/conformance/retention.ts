import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import type { JobRecord } from "../../core/job.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { claim, eventually, insert, jobInState } from "./helpers.ts";
import { settleAndRead } from "../lease-writes.ts";

const HOUR = 3600_000;

/** A job finished (succeeded) at the clock's current time. */
async function succeededNow(t: CaseContext): Promise<JobRecord> {
  await insert(t);
  const [running] = await claim(t, 1);
  return (await settleAndRead(t.adapter, { kind: "complete", id: running!.id, leaseToken: running!.leaseToken!, now: t.clock.now() }))!;
}

async function ids(t: CaseContext): Promise<number[]> {
  return (await t.adapter.list({ limit: 10_000 })).map((j) => j.id).sort((a, b) => a - b);
}

/** Retention: finished jobs are deleted after their retention, in bounded batches, safely from many workers. */
export const retentionCases: ConformanceCase[] = [
  {
    name: "retention › purge deletes finished jobs of the given states finished before the cutoff, oldest first, at most limit, and nothing else",
    async run(t) {
      const old1 = await succeededNow(t);
      t.clock.advance(1);
      const old2 = await jobInState(t, "cancelled");
      t.clock.advance(1);
      const old3 = await succeededNow(t);
      const oldDead = await jobInState(t, "dead");
      const cutoff = t.clock.now();
      t.clock.advance(HOUR);
      const recent = await succeededNow(t);
      const alive = await Promise.all((["ready", "scheduled", "running", "blocked"] as const).map((s) => jobInState(t, s)));
      const all = await ids(t);
      assert.equal(await t.adapter.purge({ states: ["succeeded", "cancelled"], finishedBefore: cutoff, limit: 2 }), 2);
      assert.deepEqual(await ids(t), all.filter((id) => id !== old1.id && id !== old2.id), "the two oldest went first");
      assert.equal(await t.adapter.purge({ states: ["succeeded", "cancelled"], finishedBefore: cutoff, limit: 100 }), 1);
      assert.equal(await t.adapter.purge({ states: ["succeeded", "cancelled"], finishedBefore: cutoff, limit: 100 }), 0);
      const left = await ids(t);
      for (const kept of [oldDead, recent, ...alive]) assert.ok(left.includes(kept.id), `job ${kept.id} (${kept.state}) is kept`);
      assert.ok(!left.includes(old3.id));
    },
  },
  {
    name: "retention › purgeFinished keeps dead letters for their own age, and null keeps forever",
    async run(t) {
      const d = t.docket({ retention: { finishedMs: HOUR, deadMs: 10 * HOUR } });
      const done = await succeededNow(t);
      const dead = await jobInState(t, "dead");
      t.clock.advance(HOUR);
      assert.deepEqual(await d.purgeFinished(), { deleted: 1 });
      assert.equal(await t.adapter.get({ id: done.id }), null);
      assert.equal((await t.adapter.get({ id: dead.id }))?.state, "dead");
      t.clock.advance(9 * HOUR);
      assert.deepEqual(await d.purgeFinished(), { deleted: 1 });
      assert.equal(await t.adapter.get({ id: dead.id }), null);
      const forever = t.docket({ retention: { finishedMs: null, deadMs: null } });
      await succeededNow(t);
      t.clock.advance(1000 * HOUR);
      assert.deepEqual(await forever.purgeFinished(), { deleted: 0 });
    },
  },
  {
    name: "retention › concurrent purgers on separate connections delete each finished job exactly once",
    async run(t) {
      const total = 60;
      for (let i = 0; i < total; i++) await succeededNow(t);
      const cutoff = t.clock.now();
      const adapters = [t.adapter, await t.connect(), await t.connect()];
      const counts = [0, 0, 0];
      await Promise.all(
        adapters.map(async (a, i) => {
          for (;;) {
            const n = await a.purge({ states: ["succeeded"], finishedBefore: cutoff, limit: 7 });
            if (n === 0) return;
            counts[i]! += n;
          }
        }),
      );
      assert.equal(counts.reduce((x, y) => x + y, 0), total);
      assert.deepEqual(await ids(t), []);
    },
  },
  {
    name: "retention › invalid retention options are InvalidArgumentError",
    async run(t) {
      for (const retention of [{ finishedMs: -1 }, { deadMs: 1.5 }, { finished: 1 }]) {
        assert.throws(() => t.docket({ retention } as never), (e: { code?: string }) => e.code === "INVALID_ARGUMENT", JSON.stringify(retention));
      }
    },
  },
  {
    name: "worker › a worker's sweep deletes finished jobs past their retention",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter, retention: { finishedMs: 0 } });
      const job = await d.enqueue("quick", {});
      const options = { pollMs: 10, leaseMs: 400, reclaimMs: 20, logger: null, handlers: { quick: () => undefined } };
      // A sweep purges at most once a minute, and a worker's first sweep may run before its first outcome
      // is recorded (outcomes are batched): finish the job first, then start the worker whose sweep is checked.
      // (The runner's own sweep may purge the job as soon as its outcome is written: watch its event, not its row.)
      const succeeded: number[] = [];
      const runner = d.worker({ ...options, onEvent: (e) => void (e.type === "succeeded" && succeeded.push(e.job.id)) });
      await runner.start();
      await eventually(async () => succeeded.includes(job.id), 10_000, "the job succeeded");
      await runner.stop();
      const w = d.worker(options);
      await w.start();
      try {
        await eventually(async () => (await d.get(job.id)) === null, 10_000, "the finished job was purged");
      } finally {
        await w.stop();
      }
    },
  },
];
