import assert from "node:assert/strict";
import { InvalidArgumentError } from "../../core/errors.ts";
import { ERROR_HISTORY, toJob, type AttemptError, type JobRecord } from "../../core/job.ts";
import type { ConformanceCase, CaseContext } from "../harness.ts";
import { LEASE_MS, claim, eventually } from "./helpers.ts";

/** Claims up to `limit` jobs of the default queue as worker `worker`. */
const claimAs = (t: CaseContext, worker: string, limit = 1): Promise<JobRecord[]> => claim(t, limit, t.adapter, ["default"], worker);

async function errorsOf(t: CaseContext, id: number): Promise<AttemptError[]> {
  const record = await t.adapter.get({ id });
  assert.ok(record, `job ${id} exists`);
  return toJob(record).errors;
}

/** Fails `job` (claimed) through the batched outcome path, retrying at once unless `dead`. */
async function fail(t: CaseContext, job: JobRecord, error: string, dead = false): Promise<void> {
  const now = t.clock.now();
  const [moved] = await t.adapter.settle({
    items: [{ kind: "fail", id: job.id, leaseToken: job.leaseToken!, now, error, retryAt: dead ? null : now, concurrencyKey: job.concurrencyKey }],
  });
  assert.ok(moved, `the failure of job ${job.id} was written`);
}

/** Who ran a job and how each attempt failed: `JobRecord.worker` and the error history (`errors`). */
export const historyCases: ConformanceCase[] = [
  {
    name: "history › a claim stores the worker's name with the job; stats list it with the running job",
    async run(t) {
      const d = t.docket();
      const job = await d.enqueue("t", {});
      assert.equal(job.worker, null, "not claimed yet");
      const [claimed] = await claimAs(t, "node-a/pid-7");
      assert.equal(claimed?.worker, "node-a/pid-7");
      assert.equal((await d.get(job.id))?.worker, "node-a/pid-7");
      const stats = await d.stats();
      assert.deepEqual(
        stats.running.map((r) => [r.id, r.worker]),
        [[job.id, "node-a/pid-7"]],
      );
    },
  },
  {
    name: "history › a worker claims under its name (default pid-<pid>-<hex>); a bad name is refused before anything runs",
    slow: true,
    async run(t) {
      const d = t.docket();
      assert.throws(() => d.worker({ name: "", handlers: { t: () => undefined } }), InvalidArgumentError);
      assert.throws(() => d.worker({ name: 7 as unknown as string, handlers: { t: () => undefined } }), InvalidArgumentError);
      assert.match(d.worker({ handlers: { t: () => undefined } }).name, /^(pid-\d+|w)-[0-9a-f]{6}$/);
      const job = await d.enqueue("t", {});
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let started = false;
      const w = d.worker({ name: "api-3", logger: null, pollMs: 20, handlers: { t: () => ((started = true), gate) } });
      await w.start();
      try {
        await eventually(async () => started, 10_000, "the handler started");
        assert.equal((await d.get(job.id))?.worker, "api-3");
        assert.equal((await d.stats()).running[0]?.worker, "api-3");
      } finally {
        release();
        await w.stop();
      }
      assert.equal((await d.get(job.id))?.state, "succeeded");
      assert.equal((await d.get(job.id))?.worker, "api-3", "kept after the job finished: who ran it");
    },
  },
  {
    name: "history › each failed attempt appends {attempt, at, error, worker}, a lease expiry included; a replay keeps the history",
    async run(t) {
      const d = t.docket({ retry: { baseMs: 1, jitter: 0 } });
      const job = await d.enqueue("t", {}, { maxAttempts: 3 });
      const [a1] = await claimAs(t, "w1");
      const t1 = t.clock.now();
      await fail(t, a1!, "boom 1");
      t.clock.advance(5);
      const [a2] = await claimAs(t, "w2");
      t.clock.advance(LEASE_MS + 1);
      const t2 = t.clock.now();
      assert.deepEqual(await d.reclaimExpired(), { retried: 1, dead: 0 });
      t.clock.advance(5);
      const [a3] = await claimAs(t, "w3");
      assert.equal(a3?.attempt, 3);
      const t3 = t.clock.now();
      await fail(t, a3!, "boom 3\n    at handler (job.ts:1)", true);
      const history = await errorsOf(t, job.id);
      assert.deepEqual(
        history.map((e) => [e.attempt, e.at, e.worker]),
        [
          [1, t1, "w1"],
          [2, t2, "w2"],
          [3, t3, "w3"],
        ],
      );
      assert.equal(history[0]!.error, "boom 1");
      assert.match(history[1]!.error, /lease expired/);
      assert.equal(history[2]!.error, "boom 3\n    at handler (job.ts:1)");
      assert.equal(a2!.attempt, 2);
      await d.deadLetters.replay(job.id);
      const replayed = await d.get(job.id);
      assert.equal(replayed?.lastError, null);
      assert.equal((await errorsOf(t, job.id)).length, 3, "a replay keeps the failed attempts");
    },
  },
  {
    name: "history › failures written in one batch each record their own attempt; keyed and unkeyed alike",
    async run(t) {
      const d = t.docket();
      const plain = await d.enqueueMany([
        { task: "t", payload: 1 },
        { task: "t", payload: 2 },
      ]);
      const keyed = await d.enqueue("t", 3, { concurrency: { key: "k", limit: 2 } });
      const [p1] = await claimAs(t, "wa");
      await fail(t, p1!, "first");
      const claimed = await claimAs(t, "wb", 3);
      assert.equal(claimed.length, 3);
      const now = t.clock.now();
      await t.adapter.settle({
        items: claimed.map((j) => ({ kind: "fail" as const, id: j.id, leaseToken: j.leaseToken!, now, error: "same", retryAt: now + 1000, concurrencyKey: j.concurrencyKey })),
      });
      const byId = async (id: number) => (await errorsOf(t, id)).map((e) => `${e.attempt}:${e.worker}:${e.error}`);
      assert.deepEqual(await byId(plain[0]!.id), ["1:wa:first", "2:wb:same"]);
      assert.deepEqual(await byId(plain[1]!.id), ["1:wb:same"]);
      assert.deepEqual(await byId(keyed.id), ["1:wb:same"]);
    },
  },
  {
    name: `history › keeps the newest ${ERROR_HISTORY.entries} failed attempts, each error cut to ${ERROR_HISTORY.chars} characters (lastError whole)`,
    async run(t) {
      const d = t.docket();
      const job = await d.enqueue("t", {}, { maxAttempts: 100 });
      const attempts = ERROR_HISTORY.entries + 3;
      const long = "x".repeat(ERROR_HISTORY.chars + 500);
      for (let i = 1; i <= attempts; i++) {
        const [a] = await claimAs(t, `w${i}`);
        assert.equal(a?.id, job.id);
        await fail(t, a!, i === attempts ? long : `boom ${i}`);
        t.clock.advance(1);
      }
      const history = await errorsOf(t, job.id);
      assert.equal(history.length, ERROR_HISTORY.entries);
      assert.deepEqual(
        history.map((e) => e.attempt),
        Array.from({ length: ERROR_HISTORY.entries }, (_, i) => attempts - ERROR_HISTORY.entries + 1 + i),
      );
      assert.equal(history.at(-1)!.error, long.slice(0, ERROR_HISTORY.chars));
      assert.equal((await d.get(job.id))?.lastError, long);
    },
  },
];
