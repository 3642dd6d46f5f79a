/**
 * stop() past its timeout releases a job whose handler is still running. A
 * handler that returns while that release is being written must record
 * nothing: one outcome per attempt (released), no second event, no false
 * "lost: reclaimed".
 */
import { describe, expect, it } from "vitest";
import { Docket, type Handler } from "../../src/index.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { memoryAdapter } from "../../src/memory.ts";
import { sqliteAdapter } from "../../src/adapters/sqlite/index.ts";
import type { DocketAdapter, SettleParams } from "../../src/core/adapter.ts";

/** `inner` with its release writes held until `onRelease` ran and 50 ms passed (no hand-offs). */
function holdingReleases(inner: DocketAdapter, onRelease: () => void): DocketAdapter {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === "settleAndHandOff") return undefined;
      if (prop === "settle") {
        return async (params: SettleParams) => {
          if (params.items.some((i) => i.kind === "release")) {
            onRelease();
            await new Promise((r) => setTimeout(r, 50));
          }
          return target.settle(params);
        };
      }
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  }) as DocketAdapter;
}

/**
 * Runs one job of task "slow" on `inner` (its release writes held, see holdingReleases) whose handler, made by
 * `handler`, calls `started` once running and may return once `mayReturn` resolves (when the release is written);
 * stops the worker past its 20 ms timeout. Resolves with the docket's events and the job as stored.
 */
async function stopDuringRelease(inner: DocketAdapter, handler: (started: () => void, mayReturn: Promise<void>) => Handler<null>) {
  let finishHandler!: () => void;
  const handlerMayReturn = new Promise<void>((r) => (finishHandler = r));
  const docket = new Docket({ adapter: holdingReleases(inner, () => finishHandler()) });
  try {
    await docket.migrate();
    const events: string[] = [];
    docket.on("*", (e) => void events.push(e.type === "lost" ? `lost: ${e.reason}` : e.type));
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const worker = docket.worker({ logger: null, shutdownTimeoutMs: 20, handlers: { slow: handler(() => started(), handlerMayReturn) } });
    const job = await docket.enqueue("slow", null);
    await worker.start();
    await running;
    await worker.stop();
    await new Promise((r) => setTimeout(r, 100));
    return { events, stored: await docket.get(job.id) };
  } finally {
    await docket.close();
  }
}

describe("stop() and a handler that returns during the release", () => {
  it("the job is released once: one outcome event, no lost event, the handler's late result not recorded", async () => {
    const { events, stored } = await stopDuringRelease(memoryAdapter(), (started, mayReturn) => () => (started(), mayReturn.then(() => "done")));
    expect(events).toEqual(["enqueued", "started", "released"]);
    expect([stored?.state, stored?.attempt, stored?.result]).toEqual(["ready", 0, null]);
  });

  it("a handler whose ctx.transaction ends during the release: the transaction does not commit, and the job is released once (SQLite)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "docket-stop-tx-"));
    try {
      const { events, stored } = await stopDuringRelease(sqliteAdapter({ filename: join(dir, "db.sqlite") }), (started, mayReturn) => (_payload, ctx) =>
        ctx.transaction(async () => {
          started();
          await mayReturn;
          return "done-in-tx";
        }),
      );
      expect(events).toEqual(["enqueued", "started", "released"]);
      expect([stored?.state, stored?.attempt, stored?.result]).toEqual(["ready", 0, null]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
