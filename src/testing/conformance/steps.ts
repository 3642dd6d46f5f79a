import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import { InvalidArgumentError, LeaseLostError, PayloadTooLargeError, UnsupportedError } from "../../core/errors.ts";
import { readSteps, withStep } from "../../core/steps.ts";
import type { ConformanceCase } from "../harness.ts";
import { claim, insert } from "./helpers.ts";
import { settleOne } from "../lease-writes.ts";

/** Durable steps (`ctx.step`): recorded by the lease holder only, kept across attempts and replays. */
export const stepCases: ConformanceCase[] = [
  {
    name: "steps › recordStep stores a job's steps for the lease holder only; another token or a finished job writes nothing; get returns them",
    async run(t) {
      const job = await insert(t);
      const [running] = await claim(t, 1);
      assert.equal(running!.steps, null, "a new job has no steps");
      const fence = { id: job.id, leaseToken: running!.leaseToken!, now: t.clock.now() };
      const one = withStep(null, "charge", '{"id":7}', fence.now);
      assert.equal((await t.adapter.recordStep({ ...fence, steps: one }))?.steps, one);
      assert.equal(await t.adapter.recordStep({ ...fence, leaseToken: "not-mine", steps: withStep(one, "x", "1", fence.now) }), null);
      assert.equal((await t.adapter.get({ id: job.id }))?.steps, one, "the refused write left the steps as they were");
      await settleOne(t.adapter, { kind: "complete", ...fence });
      assert.equal(await t.adapter.recordStep({ ...fence, steps: withStep(one, "late", "2", fence.now) }), null, "a finished job takes no step");
      const stored = await t.adapter.get({ id: job.id });
      assert.deepEqual(readSteps(stored!.steps), [{ name: "charge", result: { id: 7 }, at: fence.now }]);
      assert.deepEqual((await t.docket().get(job.id))?.steps, [{ name: "charge", result: { id: 7 }, at: fence.now }]);
    },
  },
  {
    name: "steps › ctx.step runs its function once across attempts: a retry gets the stored result, and a step not recorded before the failure runs",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter, retry: { baseMs: 0, jitter: 0 } });
      const calls = { charge: 0, pdf: 0 };
      const seen: unknown[] = [];
      const w = d.worker({
        pollMs: 10,
        logger: null,
        handlers: {
          invoice: async (_p, ctx) => {
            const charge = await ctx.step("charge", () => {
              calls.charge++;
              return { id: 7 };
            });
            seen.push(charge);
            if (ctx.job.attempt === 1) throw new Error("crash after the charge");
            const pdf = await ctx.step("pdf", () => {
              calls.pdf++;
              return undefined;
            });
            return { charge, pdf };
          },
        },
      });
      const job = await d.enqueue("invoice", {}, { maxAttempts: 3 });
      await w.start();
      try {
        const done = await d.waitFor(job.id, { timeoutMs: 10_000, pollMs: 10 });
        assert.equal(done.state, "succeeded");
        assert.equal(done.attempt, 2);
        assert.deepEqual(calls, { charge: 1, pdf: 1 }, "each step's function ran once");
        assert.deepEqual(seen, [{ id: 7 }, { id: 7 }], "both attempts got the result as stored");
        assert.deepEqual(done.result, { charge: { id: 7 }, pdf: null });
        assert.deepEqual(
          done.steps.map((s) => [s.name, s.result]),
          [
            ["charge", { id: 7 }],
            ["pdf", null],
          ],
        );
      } finally {
        await w.stop();
      }
    },
  },
  {
    name: "steps › bad steps reject with typed errors and record nothing: a repeated name, a name that is not a non-empty string, a result over the payload limit; a lost lease rejects with LeaseLostError",
    slow: true,
    async run(t) {
      const d = new Docket({ adapter: t.adapter, maxPayloadBytes: 200, retry: { baseMs: 0, jitter: 0 } });
      const errors: Record<string, unknown> = {};
      let ran = 0;
      const capture = async (what: string, f: () => Promise<unknown>) => {
        try {
          await f();
          errors[what] = "no error";
        } catch (error) {
          errors[what] = error;
        }
      };
      const w = d.worker({
        pollMs: 10,
        logger: null,
        handlers: {
          bad: async (_p, ctx) => {
            await ctx.step("once", () => ++ran);
            await capture("repeated", () => ctx.step("once", () => ++ran));
            await capture("empty", () => ctx.step("", () => ++ran));
            await capture("number", () => ctx.step(7 as unknown as string, () => ++ran));
            await capture("large", () => ctx.step("large", () => "x".repeat(300)));
            await d.cancel(ctx.job.id);
            await capture("lost", () => ctx.step("after-cancel", () => ++ran));
          },
        },
      });
      const job = await d.enqueue("bad", {});
      await w.start();
      try {
        await d.waitFor(job.id, { timeoutMs: 10_000, pollMs: 10 }).catch(() => undefined);
        for (let i = 0; i < 200 && !("lost" in errors); i++) await new Promise((r) => setTimeout(r, 10));
      } finally {
        await w.stop();
      }
      assert.ok(errors.repeated instanceof InvalidArgumentError, `repeated: ${String(errors.repeated)}`);
      assert.ok(errors.empty instanceof InvalidArgumentError, `empty: ${String(errors.empty)}`);
      assert.ok(errors.number instanceof InvalidArgumentError, `number: ${String(errors.number)}`);
      assert.ok(errors.large instanceof PayloadTooLargeError, `large: ${String(errors.large)}`);
      assert.ok(errors.lost instanceof LeaseLostError, `lost: ${String(errors.lost)}`);
      assert.equal(ran, 1, "the repeated and the misnamed steps never called their functions, nor the step after the cancel (its worker knew the lease lost)");
      const stored = await d.get(job.id);
      assert.deepEqual(
        stored!.steps.map((s) => s.name),
        ["once"],
        "only the first step was recorded",
      );
    },
  },
  {
    name: "steps › a job's steps together are bounded like one payload: a step that would take them past the limit is PAYLOAD_TOO_LARGE and records nothing; the steps before it stand, and a smaller one after it is recorded",
    slow: true,
    async run(t) {
      // Each step alone fits 200 bytes; two of them together do not (MariaDB could store no list past its packet).
      const d = new Docket({ adapter: t.adapter, maxPayloadBytes: 200, retry: { baseMs: 0, jitter: 0 } });
      let refused: unknown = "no error";
      const w = d.worker({
        pollMs: 10,
        logger: null,
        handlers: {
          big: async (_p, ctx) => {
            await ctx.step("a", () => "x".repeat(60));
            try {
              await ctx.step("b", () => "y".repeat(60));
            } catch (error) {
              refused = error;
            }
            await ctx.step("c", () => 1);
            return "done";
          },
        },
      });
      const job = await d.enqueue("big", {}, { maxAttempts: 1 });
      await w.start();
      try {
        const done = await d.waitFor(job.id, { timeoutMs: 10_000, pollMs: 10 });
        assert.equal(done.state, "succeeded", `the handler went on after the refused step: ${JSON.stringify(done.errors)}`);
      } finally {
        await w.stop();
      }
      assert.ok(refused instanceof PayloadTooLargeError, `the step past the limit: ${String(refused)}`);
      assert.match((refused as Error).message, /steps of job/);
      const stored = await d.get(job.id);
      assert.deepEqual(
        stored!.steps.map((s) => s.name),
        ["a", "c"],
        "the refused step wrote nothing; the ones before and after it are recorded",
      );
    },
  },
  {
    name: "steps › a replayed dead job keeps its steps; replay with resetSteps forgets them",
    async run(t) {
      const d = t.docket();
      const jobs = [await insert(t, { maxAttempts: 1 }), await insert(t, { maxAttempts: 1 })];
      for (const running of await claim(t, 2)) {
        const fence = { id: running.id, leaseToken: running.leaseToken!, now: t.clock.now() };
        await t.adapter.recordStep({ ...fence, steps: withStep(null, "a", "1", fence.now) });
        await settleOne(t.adapter, { kind: "fail", ...fence, error: "boom", retryAt: null });
      }
      assert.deepEqual((await d.deadLetters.replay(jobs[0]!.id)).steps.map((s) => s.name), ["a"]);
      assert.deepEqual((await d.deadLetters.replay(jobs[1]!.id, { resetSteps: true })).steps, []);
      await assert.rejects(d.deadLetters.replay(jobs[0]!.id, { resetSteps: "yes" as unknown as boolean }), InvalidArgumentError);
    },
  },
  {
    name: "ctx.transaction › on an adapter without database transactions (the memory adapter) it rejects with UnsupportedError, and the handler's outcome decides",
    slow: true,
    async run(t) {
      if (t.adapter.completeInTransaction !== undefined) return; // the SQL adapters: docket/testing/kysely's ctx.transaction cases
      const d = new Docket({ adapter: t.adapter });
      let error: unknown = null;
      const w = d.worker({
        pollMs: 10,
        logger: null,
        handlers: {
          t: async (_p, ctx) => {
            error = await ctx.transaction(async () => 1).catch((e) => e);
            return "handler";
          },
        },
      });
      const job = await d.enqueue("t", {});
      await w.start();
      try {
        const done = await d.waitFor(job.id, { timeoutMs: 10_000, pollMs: 10 });
        assert.ok(error instanceof UnsupportedError, String(error));
        assert.equal(done.result, "handler");
      } finally {
        await w.stop();
      }
    },
  },
];
