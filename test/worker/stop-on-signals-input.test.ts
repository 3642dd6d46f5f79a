/** worker.stopOnSignals() input: only catchable shutdown signals, all or none listened to, typed errors. */
import { describe, expect, it } from "vitest";
import { Docket, InvalidArgumentError } from "../../src/index.ts";
import { memoryAdapter } from "../../src/memory.ts";

describe("worker.stopOnSignals input", () => {
  it("an unknown or uncatchable signal, or a bad onStopped, is InvalidArgumentError and adds no listener", async () => {
    const docket = new Docket({ adapter: memoryAdapter() });
    const worker = docket.worker({ queues: ["q"], logger: null, handlers: { t: () => undefined } });
    const before = ["SIGINT", "SIGTERM", "SIGHUP"].map((s) => process.listenerCount(s));
    for (const signals of [["SIGFOO"], ["SIGKILL"], ["SIGSTOP"], ["SIGTERM", "SIGKILL"], [], "SIGTERM", [1]]) {
      expect(() => worker.stopOnSignals({ signals: signals as never }), JSON.stringify(signals)).toThrow(InvalidArgumentError);
    }
    expect(() => worker.stopOnSignals({ onStopped: "exit" as never })).toThrow(InvalidArgumentError);
    expect(["SIGINT", "SIGTERM", "SIGHUP"].map((s) => process.listenerCount(s))).toEqual(before);
    const off = worker.stopOnSignals({ signals: ["SIGHUP"] });
    expect(process.listenerCount("SIGHUP")).toBe(before[2]! + 1);
    off();
    expect(process.listenerCount("SIGHUP")).toBe(before[2]);
    // stop()'s options are checked whether or not the worker ever started.
    await expect(worker.stop({ timeoutMs: Number.NaN })).rejects.toThrow(InvalidArgumentError);
    await docket.close();
  });
});
