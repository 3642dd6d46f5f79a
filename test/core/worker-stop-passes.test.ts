import { expect, test } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Docket } from "../../src/client/docket.ts";
import { sqliteAdapter } from "../../src/adapters/sqlite/index.ts";

test("worker.stop() resolves only after a sweep pass under way has ended, so the adapter can be closed next with no error", async () => {
  const dir = mkdtempSync(join(tmpdir(), "docket-stop-"));
  try {
    const real = sqliteAdapter({ filename: join(dir, "s.db") });
    let started!: () => void;
    const sweepStarted = new Promise<void>((r) => (started = r));
    let sweepEnded = false;
    const adapter = new Proxy(real, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (property !== "listExpired" || typeof value !== "function") return typeof value === "function" ? value.bind(target) : value;
        return async (...args: unknown[]) => {
          started();
          await new Promise((r) => setTimeout(r, 300));
          const result = await value.apply(target, args);
          sweepEnded = true;
          return result;
        };
      },
    });
    const docket = new Docket({ adapter });
    await docket.migrate();
    const errors: string[] = [];
    const worker = docket.worker({
      logger: null,
      reclaimMs: 20,
      handlers: { t: () => undefined },
      onEvent: (e) => void (e.type === "error" && errors.push(e.error.message)),
    });
    await worker.start();
    await sweepStarted;
    await worker.stop();
    expect(sweepEnded).toBe(true);
    await real.close();
    await new Promise((r) => setTimeout(r, 400));
    expect(errors).toEqual([]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
