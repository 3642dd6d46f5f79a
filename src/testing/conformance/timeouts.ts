import assert from "node:assert/strict";
import type { ConformanceCase } from "../harness.ts";

/** Storage of a job's timeout: its timeoutMs is validated, stored and read back. */
export const timeoutCases: ConformanceCase[] = [
  {
    name: "enqueue › timeoutMs per job overrides the task's, is stored, and is null when neither gives one",
    async run(t) {
      const d = t.docket({ tasks: { slow: { timeoutMs: 5_000 }, plain: {} } });
      const own = await d.enqueue("slow", {}, { timeoutMs: 250 });
      const inherited = await d.enqueue("slow", {});
      const none = await d.enqueue("plain", {});
      assert.deepEqual([own.timeoutMs, inherited.timeoutMs, none.timeoutMs], [250, 5_000, null]);
      assert.equal((await d.get(own.id))?.timeoutMs, 250);
      assert.equal((await d.get(inherited.id))?.timeoutMs, 5_000);
      assert.equal((await d.get(none.id))?.timeoutMs, null);
    },
  },
  {
    name: "enqueue › an invalid timeoutMs (0, 1.5, NaN, over 24 h) is InvalidArgumentError and writes nothing",
    async run(t) {
      const d = t.docket();
      for (const timeoutMs of [0, 1.5, Number.NaN, 24 * 3600_000 + 1, -1]) {
        await assert.rejects(d.enqueue("t", {}, { timeoutMs }), (e: { code?: string; message?: string }) => e.code === "INVALID_ARGUMENT" && /timeoutMs/.test(e.message ?? ""));
      }
      assert.throws(() => t.docket({ tasks: { t: { timeoutMs: 0 } } }), (e: { code?: string }) => e.code === "INVALID_ARGUMENT");
      assert.deepEqual(await d.list(), []);
    },
  },
];
