import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sqliteAdapter } from "../../src/adapters/sqlite/index.ts";
import { StatementHook } from "../../src/testing/kysely/statement-hook.ts";

const dir = mkdtempSync(join(tmpdir(), "docket-hook-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function hooked(name: string, timeoutMs: number) {
  const hook = new StatementHook({ name, timeoutMs });
  const adapter = sqliteAdapter({ filename: join(dir, `${name.replace(/\W/g, "")}.db`), instrument: { wrapDialect: (d) => hook.wrap(d) } });
  await adapter.migrate();
  return { hook, adapter };
}

const job = (now: number) => ({ task: "t", queue: "default", payload: "{}", state: "ready" as const, priority: 0, runAt: now, maxAttempts: 1, backoff: null, concurrency: null });

describe("statement hooks wait by label, never forever", () => {
  it("holds the statement carrying the label it waits for, then lets it run", async () => {
    const { hook, adapter } = await hooked("holds", 5_000);
    try {
      const held = hook.holdNext("enqueue");
      const enqueue = adapter.enqueue({ jobs: [job(1)], now: 1 });
      expect(await held.reached).toContain("/* docket:enqueue */");
      held.release();
      expect((await enqueue).length).toBe(1);
    } finally {
      await adapter.close();
    }
  });

  it("a label that never comes fails `reached` after the timeout, naming the label and the case", async () => {
    const { hook, adapter } = await hooked("races › never", 200);
    try {
      const held = hook.holdNext("tick");
      await adapter.enqueue({ jobs: [job(1)], now: 1 });
      await expect(held.reached).rejects.toThrow("statement hook: no statement labelled /* docket:tick */ (races › never) arrived within 200 ms");
    } finally {
      await adapter.close();
    }
  });

  it("a held statement nobody releases is crashed after the timeout, naming the label and the case", async () => {
    const { hook, adapter } = await hooked("races › forgotten", 200);
    try {
      const held = hook.holdNext("enqueue");
      const enqueue = adapter.enqueue({ jobs: [job(1)], now: 1 });
      await held.reached;
      await expect(enqueue).rejects.toThrow(/the statement labelled \/\* docket:enqueue \*\/ \(races › forgotten\) was held 200 ms without release/);
    } finally {
      await adapter.close();
    }
  });
});
