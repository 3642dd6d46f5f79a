import { afterAll, describe, expect, it } from "vitest";
import type { DocketAdapter } from "../src/core/adapter.ts";
import { sqliteAdapter } from "../src/adapters/sqlite/index.ts";
import { memoryAdapter } from "../src/adapters/memory/index.ts";

/** The single-job writes docket never calls: the worker writes outcomes with `settle` and heartbeats with `extendLeases`. */
const NEVER_CALLED = ["heartbeat", "complete", "fail", "release"];

/** Every method an adapter object offers, its own and its prototypes'. */
function methodsOf(adapter: object): string[] {
  const names = new Set<string>();
  for (let o: object | null = adapter; o !== null && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const name of Object.getOwnPropertyNames(o)) if (name !== "constructor" && typeof (adapter as Record<string, unknown>)[name] === "function") names.add(name);
  }
  return [...names].sort();
}

describe("the adapter contract is what docket calls", () => {
  const adapters: [string, DocketAdapter][] = [
    ["sqlite", sqliteAdapter({ filename: ":memory:" })],
    ["memory", memoryAdapter()],
  ];
  afterAll(async () => {
    for (const [, a] of adapters) await a.close();
  });

  for (const [name, adapter] of adapters) {
    it(`${name}: implements no single-job heartbeat, complete, fail or release`, () => {
      expect(methodsOf(adapter).filter((m) => NEVER_CALLED.includes(m))).toEqual([]);
    });
  }

  it("capabilities are read through the contract; absent members mean a single writer", () => {
    const [[, sqlite], [, memory]] = adapters as [[string, DocketAdapter], [string, DocketAdapter]];
    expect({ rowLocks: sqlite.capabilities?.rowLocks, skipLocked: sqlite.capabilities?.skipLocked, blocking: sqlite.blocking }).toEqual({ rowLocks: false, skipLocked: false, blocking: true });
    expect({ rowLocks: memory.capabilities?.rowLocks ?? false, skipLocked: memory.capabilities?.skipLocked ?? false, blocking: memory.blocking }).toEqual({ rowLocks: false, skipLocked: false, blocking: true });
  });
});
