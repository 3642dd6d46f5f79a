import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import type { ClaimParams, DocketAdapter, SettleAndHandOffParams } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { LEASE_MS, eventually, insert, newJob, sleep, token } from "./helpers.ts";

/** A claim of `limit` jobs of `queues` of which at most `constrainedLimit` (when given) may be constrained; the claimed ids in the order returned. */
async function claimIds(t: CaseContext, limit: number, constrainedLimit: number | undefined, queues = ["default"]): Promise<number[]> {
  const now = t.clock.now();
  const claimed = await t.adapter.claim({ queues, limit, ...(constrainedLimit === undefined ? {} : { constrainedLimit }), now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
  return claimed.map((j) => j.id);
}

const ids = (jobs: JobRecord[]) => jobs.map((j) => j.id);

/** `adapter`, telling `claimed` the jobs each claim returns as it returns them. */
function noticingClaims(adapter: DocketAdapter, claimed: (jobs: JobRecord[]) => void): DocketAdapter {
  const claim = async (params: ClaimParams) => {
    const jobs = await adapter.claim(params);
    claimed(jobs);
    return jobs;
  };
  // A hand-off claims too (see DocketAdapter.settleAndHandOff).
  const settleAndHandOff = adapter.settleAndHandOff && (async (params: SettleAndHandOffParams) => {
    const written = await adapter.settleAndHandOff!(params);
    claimed(written.claimed);
    return written;
  });
  return new Proxy(adapter, {
    get(target, property) {
      if (property === "claim") return claim;
      if (property === "settleAndHandOff") return settleAndHandOff;
      const value = Reflect.get(target, property);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** How long each handler of the worker cases runs. */
const HANDLER_MS = 100;

/** The three ways a job holds a slot another worker could use, as a worker case sets them up. */
const CONSTRAINTS = [
  { what: "a queue cap of 4", setUp: (d: Docket) => d.setQueueCap("q", 4), options: {} },
  { what: "a task cap of 4", setUp: (d: Docket) => d.setTaskCap("slow", 4), options: {} },
  { what: "a concurrency key of limit 4", setUp: async () => undefined, options: { concurrency: { key: "k", limit: 4 } } },
] as const;

export const constrainedCases: ConformanceCase[] = [
  {
    name: "claim › with constrainedLimit 1, takes one keyed job and every unkeyed one, keyed first; a keyed job past the limit does not hide the jobs behind it",
    async run(t) {
      const key = (k: string) => ({ concurrency: { key: k, limit: 5, onConflict: "block" as const } });
      const keyed = [await insert(t, { priority: 0, ...key("a") }), await insert(t, { priority: 1, ...key("b") }), await insert(t, { priority: 2, ...key("a") })];
      const free = [await insert(t, { priority: 3 }), await insert(t, { priority: 4 }), await insert(t, { priority: 5 })];
      assert.deepEqual(await claimIds(t, 3, 1), [keyed[0]!.id, free[0]!.id, free[1]!.id], "the first keyed job, then the unkeyed ones behind the other keyed ones");
      assert.deepEqual(await claimIds(t, 10, 0), [free[2]!.id], "constrainedLimit 0 takes no keyed job");
      assert.deepEqual(await claimIds(t, 10, 0), []);
      assert.deepEqual(await claimIds(t, 10, 1), [keyed[1]!.id]);
      assert.deepEqual(await claimIds(t, 10, undefined), [keyed[2]!.id], "without constrainedLimit, any job may be keyed");
    },
  },
  {
    name: "claim › with constrainedLimit 1, takes one job of a capped queue, a capped task or a key, plus every unconstrained one; with 0, none of them",
    async run(t) {
      await t.adapter.setQueueControl({ queue: "capped", maxRunning: 10 });
      await t.adapter.setTaskControl({ task: "heavy", maxRunning: 10 });
      const constrained = [
        await insert(t, { queue: "capped", priority: 0 }),
        await insert(t, { task: "heavy", priority: 1 }),
        await insert(t, { priority: 2, concurrency: { key: "k", limit: 5, onConflict: "block" } }),
      ];
      const free = [await insert(t, { priority: 3 }), await insert(t, { priority: 4 }), await insert(t, { priority: 5 }), await insert(t, { queue: "other", priority: 6 })];
      const queues = ["default", "capped", "other"];
      assert.deepEqual(await claimIds(t, 2, 0, queues), [free[0]!.id, free[1]!.id], "constrained jobs ahead do not hide the unconstrained ones");
      assert.deepEqual(await claimIds(t, 10, 1, queues), [constrained[0]!.id, free[2]!.id, free[3]!.id], "one constrained job, first");
      assert.deepEqual(await claimIds(t, 10, 0, queues), []);
      assert.deepEqual(await claimIds(t, 10, 1, queues), [constrained[1]!.id]);
      assert.deepEqual(await claimIds(t, 10, 1, queues), [constrained[2]!.id]);
      const running = await t.adapter.list({ state: "running", limit: 100 });
      assert.deepEqual(ids(running), [...ids(constrained), ...ids(free)].sort((a, b) => a - b));
    },
  },
  {
    name: "claim › a constrainedLimit or limit that is not an integer >= 0 is InvalidArgumentError and claims nothing",
    async run(t) {
      const job = await insert(t);
      const now = t.clock.now();
      const bad: [number, unknown][] = [
        [10, -1],
        [10, 1.5],
        [10, Number.NaN],
        [10, "1"],
        [10, null],
        [-1, 1],
        [2.5, 1],
        [Number.NaN, undefined],
      ];
      for (const [limit, constrainedLimit] of bad) {
        const params = { queues: ["default"], limit, ...(constrainedLimit === undefined ? {} : { constrainedLimit }), now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS };
        await assert.rejects(
          () => t.adapter.claim(params as never),
          (e: { code?: string; message?: string }) => e.code === "INVALID_ARGUMENT" && /(constrainedLimit|limit) must be an integer >= 0/.test(e.message ?? ""),
          `limit ${String(limit)}, constrainedLimit ${String(constrainedLimit)}`,
        );
      }
      assert.deepEqual(await t.adapter.get({ id: job.id }), job);
    },
  },
  {
    name: "claim › concurrent claims with constrainedLimit on separate connections never claim a job twice, and each takes at most its constrainedLimit constrained jobs, first",
    slow: true,
    async run(t) {
      const claimers = [t.adapter, await t.connect(), await t.connect(), await t.connect()];
      await t.adapter.setQueueControl({ queue: "capped", maxRunning: 1_000 });
      let seed = 7;
      const random = (n: number) => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) % n;
      for (let round = 0; round < 20; round++) {
        const now = t.clock.advance(1);
        // Rounds alternate between queues without a cap (PostgreSQL and SQLite claim in one statement) and with one.
        const queues = round % 2 === 0 ? [`u${round}`] : [`u${round}`, "capped"];
        const jobs = Array.from({ length: 12 }, (_, i) => {
          const kind = random(3);
          const queue = kind === 2 && queues.length > 1 ? "capped" : queues[0]!;
          return newJob({ queue, runAt: now, priority: random(3), concurrency: kind === 1 ? { key: `k${round}-${i}`, limit: 1, onConflict: "block" } : null });
        });
        await t.adapter.enqueue({ jobs, now });
        const asked = claimers.map(() => ({ limit: 1 + random(4), constrainedLimit: random(3) }));
        const results = await Promise.all(
          claimers.map((a, i) => a.claim({ queues, ...asked[i]!, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS })),
        );
        const claimed = results.flat().map((j) => j.id);
        assert.equal(new Set(claimed).size, claimed.length, `round ${round}: a job was claimed twice`);
        for (const [i, batch] of results.entries()) {
          const constrained = batch.map((j) => j.concurrencyKey !== null || j.queue === "capped");
          assert.ok(batch.length <= asked[i]!.limit, `round ${round}: claimer ${i} took ${batch.length} of limit ${asked[i]!.limit}`);
          assert.ok(constrained.filter(Boolean).length <= asked[i]!.constrainedLimit, `round ${round}: claimer ${i} took ${constrained.filter(Boolean).length} constrained, constrainedLimit ${asked[i]!.constrainedLimit}`);
          assert.deepEqual(constrained, [...constrained].sort((a, b) => Number(b) - Number(a)), `round ${round}: claimer ${i}'s constrained jobs come first`);
        }
      }
    },
  },
  ...CONSTRAINTS.map(
    ({ what, setUp, options }): ConformanceCase => ({
      name: `worker › prefetch never hoards a slot: under ${what}, 4 workers of concurrency 1 run 4 handlers at once and start each job when it is claimed`,
      slow: true,
      async run(t) {
        const claimedAt = new Map<number, number>();
        const d = new Docket({ adapter: noticingClaims(t.adapter, (jobs) => jobs.forEach((j) => claimedAt.set(j.id, Date.now()))) });
        await setUp(d);
        const total = 24;
        await d.enqueueMany(Array.from({ length: total }, (_, i) => ({ task: "slow", payload: i, options: { queue: "q", ...options } })));
        let running = 0;
        let most = 0;
        let done = 0;
        let longestWait = 0;
        const slow = async (_payload: unknown, ctx: { job: { id: number } }) => {
          longestWait = Math.max(longestWait, Date.now() - claimedAt.get(ctx.job.id)!);
          most = Math.max(most, ++running);
          await sleep(HANDLER_MS);
          running--;
          done++;
        };
        const workers = Array.from({ length: 4 }, (_, i) => d.worker({ name: `w${i}`, queues: ["q"], concurrency: 1, pollMs: 20, logger: null, handlers: { slow } }));
        try {
          for (const w of workers) await w.start();
          await eventually(async () => done === total, 20_000, `${total} handlers finished`);
        } finally {
          await Promise.all(workers.map((w) => w.stop()));
        }
        assert.equal(most, 4, `at most ${most} handlers ran at once under ${what}`);
        // A buffered job waits for a handler of its worker to finish; a job claimed for a free handler starts at once.
        assert.ok(longestWait < HANDLER_MS / 2, `a job waited ${longestWait} ms from its claim's return to its start under ${what}`);
        await eventually(async () => (await d.list({ state: "succeeded", limit: 100 })).length === total, 5_000, `${total} jobs succeeded`);
      },
    }),
  ),
];
