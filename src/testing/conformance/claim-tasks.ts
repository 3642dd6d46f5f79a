import assert from "node:assert/strict";
import type { ConformanceCase } from "../harness.ts";
import { LEASE_MS, insert, token } from "./helpers.ts";
import type { CaseContext } from "../harness.ts";

function claimTasks(t: CaseContext, tasks: string[] | undefined, limit = 10) {
  const now = t.clock.now();
  return t.adapter.claim({ queues: ["default"], tasks, limit, now, leaseToken: token(), leaseExpiresAt: now + LEASE_MS });
}

/** A claim restricted to tasks takes only jobs of those tasks: a worker claims only what it can run. */
export const claimTaskCases: ConformanceCase[] = [
  {
    name: "claim › with tasks given, takes only jobs of those tasks, in claim order, and leaves the others untouched",
    async run(t) {
      const other = await insert(t, { task: "other", priority: -5 });
      const a = await insert(t, { task: "a", priority: 2 });
      const b = await insert(t, { task: "b", priority: 1 });
      const before = await t.adapter.get({ id: other.id });
      const claimed = await claimTasks(t, ["a", "b"]);
      assert.deepEqual(claimed.map((j) => j.id), [b.id, a.id]);
      assert.deepEqual(await t.adapter.get({ id: other.id }), before);
      assert.deepEqual((await claimTasks(t, undefined)).map((j) => j.id), [other.id], "without tasks, any task");
    },
  },
  {
    name: "claim › an empty tasks list claims nothing",
    async run(t) {
      await insert(t, { task: "a" });
      assert.deepEqual(await claimTasks(t, []), []);
    },
  },
  {
    name: "claim › with tasks given, a full task cap still passes over only that task",
    async run(t) {
      await t.adapter.setTaskControl({ task: "a", maxRunning: 1 });
      const a1 = await insert(t, { task: "a", priority: 0 });
      await insert(t, { task: "a", priority: 1 });
      const b = await insert(t, { task: "b", priority: 2 });
      await insert(t, { task: "c", priority: -1 });
      const claimed = await claimTasks(t, ["a", "b"]);
      assert.deepEqual(claimed.map((j) => j.id), [a1.id, b.id]);
    },
  },
];
