import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import type { WorkerEvent } from "../../worker/index.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { withFaults } from "./faults.ts";
import { eventually } from "./helpers.ts";

const FAST = { pollMs: 10, leaseMs: 2_000, heartbeatMs: 100, reclaimMs: 50, logger: null };

function realTime(t: CaseContext, adapter = t.adapter): Docket {
  return new Docket({ adapter, retry: { baseMs: 5, jitter: 0 } });
}

/** Values whose inspection throws: reading `stack`, any Proxy trap, `toJSON` and `toString`. */
function hostileValues(): unknown[] {
  const badStack = new Error("bad stack");
  Object.defineProperty(badStack, "stack", { get: () => { throw new Error("stack getter throws"); } });
  const badEverything = new Error("bad everything");
  for (const p of ["stack", "message", "name"]) Object.defineProperty(badEverything, p, { get: () => { throw new Error(`${p} throws`); } });
  const trap = () => { throw new Error("trap throws"); };
  const proxy = new Proxy({}, { get: trap, getPrototypeOf: trap, ownKeys: trap, has: trap, getOwnPropertyDescriptor: trap });
  const revocable = Proxy.revocable({}, {});
  revocable.revoke();
  const hostileJson = { toJSON: trap, toString: trap };
  return [badStack, badEverything, proxy, revocable.proxy, hostileJson, Symbol("sym")];
}

export const workerFaultCases: ConformanceCase[] = [
  {
    name: "worker › anything thrown, even a value whose inspection throws, is a stored failed attempt and the worker carries on",
    slow: true,
    async run(t) {
      const d = realTime(t);
      const values = hostileValues();
      const jobs = await d.enqueueMany(values.map((_, i) => ({ task: "hostile", payload: i, options: { maxAttempts: 1 } })));
      const after = await d.enqueue("fine", {});
      const w = d.worker({ ...FAST, handlers: { hostile: (i) => { throw values[i as number]; }, fine: () => undefined } });
      await w.start();
      await eventually(async () => (await d.deadLetters.list()).length === values.length, 10_000, "every hostile job dead");
      await eventually(async () => (await d.get(after.id))?.state === "succeeded", 10_000, "a later job still runs");
      await w.stop();
      for (const job of jobs) {
        const reason = (await d.get(job.id))?.lastError ?? "";
        assert.ok(reason.length > 0, `job ${job.id} has a stored reason`);
      }
      assert.match((await d.get(jobs[0]!.id))?.lastError ?? "", /Error: bad stack/);
    },
  },
  {
    name: "worker › an error whose text holds NUL characters is stored at once as the attempt's reason (␀ in their place), on every adapter: no failed outcome write, no second run",
    async run(t) {
      const d = realTime(t);
      const errors: string[] = [];
      let runs = 0;
      const job = await d.enqueue("nul", null, { maxAttempts: 1 });
      const thrownString = await d.enqueue("nulString", null, { maxAttempts: 1 });
      const w = d.worker({
        ...FAST,
        onEvent: (e) => void (e.type === "error" && errors.push(e.error.message)),
        handlers: {
          nul: () => {
            runs++;
            throw new Error("bad\u0000byte");
          },
          nulString: () => {
            throw "x\u0000y";
          },
        },
      });
      await w.start();
      await eventually(async () => (await d.deadLetters.list()).length === 2, 10_000, "both jobs dead");
      await w.stop();
      assert.match((await d.get(job.id))?.lastError ?? "", /^Error: bad\u2400byte/);
      assert.equal((await d.get(thrownString.id))?.lastError, "x\u2400y");
      assert.deepEqual(errors, [], "no outcome write failed");
      assert.equal(runs, 1);
    },
  },
  {
    name: "worker › a completion whose write fails is retried while the lease is held: the handler runs once and succeeds",
    slow: true,
    async run(t) {
      const faulty = withFaults(t.adapter);
      const d = realTime(t, faulty.adapter);
      const job = await d.enqueue("once", {});
      let runs = 0;
      const events: WorkerEvent[] = [];
      faulty.inject("complete", { failures: 3, when: "before" });
      const w = d.worker({ ...FAST, handlers: { once: () => void runs++ }, onEvent: (e) => events.push(e) });
      await w.start();
      await eventually(async () => (await d.get(job.id))?.state === "succeeded", 10_000, "job succeeded");
      await w.stop();
      assert.equal(runs, 1);
      assert.equal((await d.get(job.id))?.attempt, 1);
      assert.equal(faulty.calls.get("complete"), 4);
      assert.equal(events.filter((e) => e.type === "error" && e.operation === "complete").length, 3);
      assert.deepEqual(events.filter((e) => e.type === "succeeded" || e.type === "lost").map((e) => e.type), ["succeeded"]);
    },
  },
  {
    name: "worker › a completion that committed but whose answer was lost is recognised on retry: one succeeded event, no lost",
    slow: true,
    async run(t) {
      const faulty = withFaults(t.adapter);
      const d = realTime(t, faulty.adapter);
      const job = await d.enqueue("once", {});
      const events: WorkerEvent[] = [];
      faulty.inject("complete", { failures: 1, when: "after" });
      const w = d.worker({ ...FAST, handlers: { once: () => undefined }, onEvent: (e) => events.push(e) });
      await w.start();
      await eventually(async () => events.some((e) => e.type === "succeeded" || e.type === "lost"), 10_000, "an outcome event");
      await w.stop();
      assert.equal((await d.get(job.id))?.state, "succeeded");
      assert.deepEqual(events.filter((e) => e.type === "succeeded" || e.type === "lost").map((e) => e.type), ["succeeded"]);
    },
  },
  {
    name: "worker › a failure whose write fails is retried: the attempt is recorded once, as a retry",
    slow: true,
    async run(t) {
      const faulty = withFaults(t.adapter);
      const d = realTime(t, faulty.adapter);
      const job = await d.enqueue("flaky", {}, { maxAttempts: 2 });
      faulty.inject("fail", { failures: 2, when: "before" });
      let runs = 0;
      const w = d.worker({ ...FAST, handlers: { flaky: () => { if (++runs === 1) throw new Error("first try fails"); } } });
      await w.start();
      await eventually(async () => (await d.get(job.id))?.state === "succeeded", 10_000, "job succeeded on its second attempt");
      await w.stop();
      const done = await d.get(job.id);
      assert.equal(runs, 2);
      assert.equal(done?.attempt, 2);
      assert.match(done?.lastError ?? "", /first try fails/);
    },
  },
  {
    name: "worker › failed claims back off exponentially, are reported to the logger, and claiming resumes when the database answers",
    slow: true,
    async run(t) {
      const faulty = withFaults(t.adapter);
      const d = new Docket({ adapter: faulty.adapter, random: () => 0 });
      const job = await d.enqueue("later", {});
      faulty.inject("claim", { failures: 4, when: "before" });
      const logged: string[] = [];
      const errors: WorkerEvent[] = [];
      const w = d.worker({
        ...FAST,
        pollMs: 1,
        handlers: { later: () => undefined },
        logger: { warn: (m: string) => void logged.push(m) },
        onEvent: (e) => void (e.type === "error" && errors.push(e)),
      });
      await w.start();
      await eventually(async () => (await d.get(job.id))?.state === "succeeded", 20_000, "job succeeded after the claims recovered");
      await w.stop();
      // With pollMs 1 and no backoff, a failing claim would be retried every millisecond.
      assert.deepEqual(errors.map((e) => e.type === "error" && [e.operation, e.retryInMs]), [["claim", 100], ["claim", 200], ["claim", 400], ["claim", 800]]);
      assert.equal(faulty.calls.get("claim")! >= 5, true);
      assert.equal(logged.filter((m) => /claim failed \(retrying in \d+ ms\): .*injected fault/.test(m)).length, 4);
    },
  },
];
