/** What a worker warns about at its first start: handlers that cannot get jobs as configured. */
import { describe, expect, it } from "vitest";
import { Docket } from "../../src/index.ts";
import { memoryAdapter } from "../../src/memory.ts";

const capture = () => {
  const warnings: string[] = [];
  const noop = () => undefined;
  return { warnings, logger: { warn: (m: string) => void warnings.push(m), info: noop, error: noop, debug: noop } };
};

describe("worker start warnings", () => {
  it("a handler the docket's tasks registry does not name (misspelt) is warned about once, naming it and the registered tasks", async () => {
    const docket = new Docket<{ "email.send": { to: string } }>({ adapter: memoryAdapter(), tasks: { "email.send": {} } });
    const { warnings, logger } = capture();
    const worker = docket.worker({ queues: ["default"], pollMs: 10, logger: logger as never, handlers: { "email.sned": () => undefined } as never });
    await worker.start();
    await worker.stop();
    await worker.start();
    await worker.stop();
    const about = warnings.filter((w) => w.includes("email.sned"));
    expect(about).toHaveLength(1);
    expect(about[0]).toContain('"email.send"');
    await docket.close();
  });

  it("without a registry, or with every handler registered, nothing is warned", async () => {
    for (const docket of [new Docket({ adapter: memoryAdapter() }), new Docket<{ a: null }>({ adapter: memoryAdapter(), tasks: { a: {} } })]) {
      const { warnings, logger } = capture();
      const worker = docket.worker({ queues: ["default"], pollMs: 10, logger: logger as never, handlers: { a: () => undefined } });
      await worker.start();
      await worker.stop();
      expect(warnings.filter((w) => w.includes("registry"))).toEqual([]);
      await docket.close();
    }
  });
});

describe("worker log lines", () => {
  it("a logged text loses its control characters and bidirectional overrides (a name cannot reorder the line a reader sees)", async () => {
    const { oneLine } = await import("../../src/worker/log.ts");
    expect(oneLine("report\u202Efdp.exe failed\u001b[2J")).toBe("report fdp.exe failed [2J");
    expect(oneLine("a\u2066b\u2069c\u200fd")).toBe("a b c d");
  });
});
