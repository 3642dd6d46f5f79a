import { describe, expect, it } from "vitest";
import { Docket } from "../../src/index.ts";
import { memoryAdapter } from "../../src/memory.ts";
import type { ClaimParams, DocketAdapter } from "../../src/core/adapter.ts";

/**
 * The claim loop's stage requests (Producer.requestStage): a request that
 * arrives while a staging claim is in flight is not consumed by that claim,
 * whose `now` came before it. Its child must start without waiting for a
 * poll (pollMs is a minute here).
 */
describe("stage requests", () => {
  it("a child released while a staging claim is in flight is staged by the next claim, not at the next poll", async () => {
    const inner = memoryAdapter();
    let holdNextStage = false;
    let entered!: () => void;
    const stagingEntered = new Promise<void>((r) => (entered = r));
    let openGate!: () => void;
    const gate = new Promise<void>((r) => (openGate = r));
    // The memory adapter without hand-offs (an adapter may lack them; a hand-off that finds nothing also turns them
    // off for a while), with one staging claim held after its work (as a claim's transaction that staged before a commit elsewhere) until the test opens the gate.
    const adapter = new Proxy(inner, {
      get(target, prop, receiver) {
        if (prop === "settleAndHandOff") return undefined;
        if (prop === "claim") {
          return async (params: ClaimParams) => {
            const claimed = await target.claim(params);
            if (params.stage && holdNextStage) {
              holdNextStage = false;
              entered();
              await gate;
            }
            return claimed;
          };
        }
        const value = Reflect.get(target, prop, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    }) as DocketAdapter;
    const docket = new Docket({ adapter });
    await docket.migrate();
    let finishP2!: () => void;
    const p2Done = new Promise<void>((r) => (finishP2 = r));
    const worker = docket.worker({
      pollMs: 60_000,
      logger: null,
      concurrency: 4,
      handlers: {
        p1: async () => {
          holdNextStage = true;
        },
        p2: () => p2Done,
        child: async () => undefined,
      },
    });
    const [, , c1, c2] = await docket.enqueueMany([
      { task: "p1", payload: null, ref: "p1" },
      { task: "p2", payload: null, ref: "p2" },
      { task: "child", payload: null, options: { after: [{ ref: "p1" }] } },
      { task: "child", payload: null, options: { after: [{ ref: "p2" }] } },
    ]);
    await worker.start();
    try {
      // p1's success released c1: the claim that stages it is held; p2 succeeds meanwhile and releases c2.
      await stagingEntered;
      // c2's run time (p2's success) comes after the held claim's now.
      await new Promise((r) => setTimeout(r, 10));
      finishP2();
      await waitUntilReleased(docket, c2!.id);
      // The release's stage request fires on a timer: let it.
      await new Promise((r) => setTimeout(r, 20));
      openGate();
      expect((await docket.waitFor(c1!.id, { timeoutMs: 5_000, pollMs: 5 })).state).toBe("succeeded");
      expect((await docket.waitFor(c2!.id, { timeoutMs: 5_000, pollMs: 5 })).state).toBe("succeeded");
    } finally {
      await worker.stop();
      await docket.close();
    }
  });

  it("delayed jobs this docket enqueues start at their run times, each, not at the poll after them (several run times, enqueued out of order)", async () => {
    const docket = new Docket({ adapter: memoryAdapter() });
    await docket.migrate();
    const worker = docket.worker({ pollMs: 60_000, logger: null, handlers: { later: async () => undefined } });
    await worker.start();
    try {
      // The worker's first claim (at start) has staged; the next poll is a minute away.
      await new Promise((r) => setTimeout(r, 20));
      const jobs = [];
      for (const delay of [100, 300, 200]) jobs.push(await docket.enqueue("later", null, { delay }));
      for (const job of jobs) expect((await docket.waitFor(job.id, { timeoutMs: 10_000, pollMs: 5 })).state).toBe("succeeded");
    } finally {
      await worker.stop();
      await docket.close();
    }
  });

  it("a run time past setTimeout's limit (a delay of 30 days) arms no timer that fires at once: no overflow warning, no loop", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => void warnings.push(w.name);
    process.on("warning", onWarning);
    const docket = new Docket({ adapter: memoryAdapter() });
    await docket.migrate();
    const worker = docket.worker({ pollMs: 60_000, logger: null, handlers: { later: async () => undefined } });
    await worker.start();
    try {
      await docket.enqueue("later", null, { delay: 30 * 24 * 3_600_000 });
      await new Promise((r) => setTimeout(r, 200));
      expect(warnings.filter((w) => w === "TimeoutOverflowWarning")).toEqual([]);
    } finally {
      process.off("warning", onWarning);
      await worker.stop();
      await docket.close();
    }
  });

  it("a clock that does not advance (a test's) costs two timers per run time, not a loop", async () => {
    let reads = 0;
    const frozen = Date.UTC(2026, 0, 1);
    const docket = new Docket({ adapter: memoryAdapter(), clock: { now: () => (reads++, frozen) } });
    await docket.migrate();
    const worker = docket.worker({ pollMs: 60_000, logger: null, handlers: { later: async () => undefined } });
    await worker.start();
    try {
      await docket.enqueue("later", null, { delay: 2 });
      await new Promise((r) => setTimeout(r, 50));
      const before = reads;
      await new Promise((r) => setTimeout(r, 300));
      // A loop re-arming a 2 ms timer reads the clock about 150 times in 300 ms; the heartbeat and lease timers a few.
      expect(reads - before).toBeLessThan(30);
    } finally {
      await worker.stop();
      await docket.close();
    }
  });
});

/** Resolves with `id` once the job has left `waiting` (its parent's success released it). */
async function waitUntilReleased(docket: Docket, id: number): Promise<number> {
  for (;;) {
    const job = await docket.get(id);
    if (job && job.state !== "waiting") return id;
    await new Promise((r) => setTimeout(r, 2));
  }
}
