import assert from "node:assert/strict";
import type { DocketAdapter } from "../../core/adapter.ts";
import { Docket } from "../../client/docket.ts";
import type { WorkerEvent } from "../../worker/index.ts";
import type { CaseContext, ConformanceCase } from "../harness.ts";
import { eventually, insert } from "./helpers.ts";
import { keyStates } from "./keys.ts";

/** A key `name` with `limit` slots, `holders` ready jobs and `blocked` blocked ones; then a manual edit cancels the holders without promoting anyone. */
async function strandedKey(t: CaseContext, name: string, limit: number, holders: number, blocked: number): Promise<void> {
  const concurrency = { key: name, limit, onConflict: "block" as const };
  for (let i = 0; i < holders + blocked; i++) await insert(t, { concurrency });
  const s = await keyStates(t.adapter, name);
  assert.equal(s.ready?.length ?? 0, holders);
  assert.equal(s.blocked?.length ?? 0, blocked);
  await t.execute(`UPDATE {jobs} SET state = 'cancelled', finished_at = ${t.clock.now()} WHERE concurrency_key = '${name}' AND state = 'ready'`);
}

/** A maintenance pass repairs keys left with blocked jobs and free slots (which docket's own writes never leave). */
export const maintenanceCases: ConformanceCase[] = [
  {
    name: "maintenance › repairKeys promotes the blocked jobs of a key a manual edit left with free slots, reports the key once, and leaves healthy keys alone",
    needs: ["sql"],
    async run(t) {
      const d = t.docket();
      await strandedKey(t, "stranded", 2, 2, 3);
      const healthy = { key: "healthy", limit: 1, onConflict: "block" as const };
      await insert(t, { concurrency: healthy });
      await insert(t, { concurrency: healthy });
      assert.deepEqual(await d.repairKeys(), { repaired: ["stranded"] });
      const s = await keyStates(t.adapter, "stranded");
      assert.equal(s.ready?.length, 2, "two blocked jobs took the two free slots");
      assert.equal(s.blocked?.length, 1);
      assert.deepEqual(await d.repairKeys(), { repaired: [] }, "nothing left to repair");
      const h = await keyStates(t.adapter, "healthy");
      assert.deepEqual([h.ready?.length, h.blocked?.length], [1, 1]);
    },
  },
  {
    name: "maintenance › concurrent repairKeys calls on separate connections fill a stranded key's free slots exactly, never past its limit",
    needs: ["sql"],
    async run(t) {
      await strandedKey(t, "k", 3, 3, 6);
      const adapters: DocketAdapter[] = [t.adapter, await t.connect(), await t.connect()];
      const results = await Promise.all(adapters.map((adapter) => new Docket({ adapter, clock: t.clock }).repairKeys()));
      assert.equal(results.filter((r) => r.repaired.includes("k")).length >= 1, true);
      const s = await keyStates(t.adapter, "k");
      assert.equal(s.ready?.length, 3, `ready ${JSON.stringify(s)}`);
      assert.equal(s.blocked?.length, 3);
    },
  },
  {
    name: "maintenance › a worker's sweep repairs a stranded key and reports it as a keyRepaired event",
    needs: ["sql"],
    slow: true,
    async run(t) {
      await strandedKey(t, "k", 1, 1, 1);
      const d = new Docket({ adapter: t.adapter });
      const events: WorkerEvent[] = [];
      const w = d.worker({ handlers: {}, fallback: () => new Promise(() => undefined), reclaimMs: 20, pollMs: 20, logger: null, onEvent: (e) => void events.push(e) });
      await w.start();
      try {
        await eventually(async () => events.some((e) => e.type === "keyRepaired" && e.key === "k"), 10_000, "a keyRepaired event for k");
      } finally {
        await w.stop({ timeoutMs: 0 });
      }
      assert.equal(events.filter((e) => e.type === "keyRepaired").length, 1);
    },
  },
  {
    name: "maintenance › a bad repairKeys limit is InvalidArgumentError",
    async run(t) {
      const d = t.docket();
      for (const limit of [0, 1.5, -1]) await assert.rejects(d.repairKeys({ limit }), (e: { code?: string }) => e.code === "INVALID_ARGUMENT");
    },
  },
];
