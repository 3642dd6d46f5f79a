import assert from "node:assert/strict";
import { Docket } from "../../client/docket.ts";
import type { ConformanceCase } from "../harness.ts";
import { jobInState } from "./helpers.ts";

const code = (e: unknown) => (e as { code?: string }).code;

/** docket.bulk: the count an operator confirms, and one action applied to every job a filter selects. */
export const bulkCases: ConformanceCase[] = [
  {
    name: "bulk › count is the filter's exact number; cancel applies to each selected job once, up to the limit confirmed, passing keyed slots on",
    async run(t) {
      const d = new Docket({ adapter: t.adapter, clock: t.clock });
      const ready = [];
      for (let i = 0; i < 7; i++) ready.push(await d.enqueue("t", { i }, { queue: "bulk" }));
      const holder = await d.enqueue("t", {}, { queue: "bulk", concurrency: { key: "acct", limit: 1 } });
      const blocked = await d.enqueue("t", {}, { queue: "other", concurrency: { key: "acct", limit: 1 } });
      await d.enqueue("t", {}, { queue: "elsewhere" });
      assert.equal(await d.bulk.count({ state: "ready", queue: "bulk" }), 8);
      assert.equal(await d.bulk.count({ state: "blocked", concurrencyKey: "acct" }), 1);
      assert.deepEqual(await d.bulk.apply("cancel", { state: "ready", queue: "bulk" }, { limit: 5 }), { applied: 5, skipped: 0 });
      assert.equal(await d.bulk.count({ state: "ready", queue: "bulk" }), 3, "the limit confirmed bounds the call");
      assert.deepEqual(await d.bulk.apply("cancel", { state: "ready", queue: "bulk" }), { applied: 3, skipped: 0 });
      assert.equal((await d.get(holder.id))!.state, "cancelled");
      assert.equal((await d.get(blocked.id))!.state, "ready", "the cancelled holder's slot passed to the blocked job");
      assert.equal((await d.list({ queue: "elsewhere" }))[0]!.state, "ready", "other queues untouched");
      assert.deepEqual(await d.bulk.apply("delete", { state: "cancelled", queue: "bulk" }), { applied: 8, skipped: 0 });
      assert.equal(await d.bulk.count({ state: "cancelled" }), 0);
      for (const j of ready) assert.equal(await d.get(j.id), null);
    },
  },
  {
    name: "bulk › run-now makes the selected scheduled jobs due, replay the dead ones; an action the state does not allow, or bad input, is InvalidArgumentError and writes nothing",
    async run(t) {
      const d = new Docket({ adapter: t.adapter, clock: t.clock });
      const later = await d.enqueue("t", {}, { queue: "bulk", delay: 60_000 });
      const dead = await jobInState(t, "dead");
      assert.deepEqual(await d.bulk.apply("run-now", { state: "scheduled", queue: "bulk" }), { applied: 1, skipped: 0 });
      assert.equal((await d.get(later.id))!.runAt, t.clock.now());
      assert.deepEqual(await d.bulk.apply("replay", { state: "dead" }), { applied: 1, skipped: 0 });
      assert.equal((await d.get(dead.id))!.state, "scheduled");
      const before = await t.adapter.list({ limit: 1000 });
      for (const [action, filter] of [
        ["delete", { state: "ready" }],
        ["cancel", { state: "succeeded" }],
        ["run-now", { state: "ready" }],
        ["frobnicate", { state: "ready" }],
        ["cancel", { state: "nope" }],
        ["cancel", { queue: "bulk" }],
        ["cancel", { state: "ready", color: "red" }],
      ] as const) {
        await assert.rejects(d.bulk.apply(action as never, filter as never), (e) => code(e) === "INVALID_ARGUMENT", `${action} ${JSON.stringify(filter)}`);
      }
      await assert.rejects(d.bulk.count({ state: "ready", queue: "" }), (e) => code(e) === "INVALID_ARGUMENT");
      assert.deepEqual(await t.adapter.list({ limit: 1000 }), before, "nothing written");
    },
  },
  {
    name: "bulk › two concurrent cancels of one selection on separate connections: every job cancelled once, the applied counts add up to the selection",
    async run(t) {
      const d = new Docket({ adapter: t.adapter, clock: t.clock });
      for (let i = 0; i < 30; i++) await d.enqueue("t", { i }, { queue: "race" });
      const other = new Docket({ adapter: await t.connect(), clock: t.clock });
      const [a, b] = await Promise.all([d.bulk.apply("cancel", { state: "ready", queue: "race" }), other.bulk.apply("cancel", { state: "ready", queue: "race" })]);
      assert.equal(a.applied + b.applied, 30, JSON.stringify([a, b]));
      assert.equal(await d.bulk.count({ state: "cancelled", queue: "race" }), 30);
    },
  },
];
