import { describe, expect, it } from "vitest";
import { Docket, ManualClock } from "../../src/index.ts";
import { drain, memoryAdapter } from "../../src/memory.ts";

/** docket/memory's test helper: drain(docket, { handlers }) runs what is claimable now, through a real worker, and counts. */
describe("docket/memory drain", () => {
  async function setup() {
    const clock = new ManualClock();
    const docket = new Docket<{ email: { to: string }; receipt: { to: string }; other: null; flaky: null }>({ adapter: memoryAdapter(), clock, retry: { baseMs: 1000, jitter: 0 } });
    await docket.migrate();
    return { clock, docket };
  }

  it("runs every ready job and the jobs its handlers enqueue, in claim order, and leaves tasks without a handler alone", async () => {
    const { docket } = await setup();
    const ran: string[] = [];
    for (const to of ["a", "b", "c"]) await docket.enqueue("email", { to });
    const other = await docket.enqueue("other", null);
    const result = await drain(docket, {
      handlers: {
        email: async ({ to }) => {
          ran.push(`email ${to}`);
          await docket.enqueue("receipt", { to });
        },
        receipt: ({ to }) => void ran.push(`receipt ${to}`),
      },
    });
    expect(result).toEqual({ attempts: 6, succeeded: 6, retried: 0, dead: 0, lost: 0 });
    expect(ran).toEqual(["email a", "email b", "email c", "receipt a", "receipt b", "receipt c"]);
    expect((await docket.list({ state: "succeeded" })).length).toBe(6);
    expect((await docket.get(other.id))?.state).toBe("ready");
  });

  it("a failing job is retried when due: the first drain leaves it scheduled, a drain after the backoff buries it", async () => {
    const { clock, docket } = await setup();
    const job = await docket.enqueue("flaky", null, { maxAttempts: 2 });
    const handlers = { flaky: () => Promise.reject(new Error("boom")) };
    expect(await drain(docket, { handlers })).toEqual({ attempts: 1, succeeded: 0, retried: 1, dead: 0, lost: 0 });
    expect((await docket.get(job.id))?.state).toBe("scheduled");
    clock.advance(60_000);
    expect(await drain(docket, { handlers })).toEqual({ attempts: 1, succeeded: 0, retried: 0, dead: 1, lost: 0 });
    const dead = await docket.get(job.id);
    expect(dead?.state).toBe("dead");
    expect(dead?.lastError).toMatch(/^Error: boom/);
  });

  it("keyed jobs run one after another as each frees its key's slot; a paused queue is left alone", async () => {
    const { docket } = await setup();
    const concurrency = { key: "account-1", limit: 1 };
    for (const to of ["a", "b", "c"]) await docket.enqueue("email", { to }, { concurrency });
    expect((await docket.list({ state: "blocked" })).length).toBe(2);
    await docket.enqueue("email", { to: "later" }, { queue: "bulk" });
    await docket.pauseQueue("bulk");
    const result = await drain(docket, { handlers: { email: () => undefined }, queues: ["default", "bulk"] });
    expect(result.succeeded).toBe(3);
    expect((await docket.list({ queue: "bulk", state: "ready" })).length).toBe(1);
  });

  it("throws past maxAttempts when handlers keep enqueueing, and stops its worker", async () => {
    const { docket } = await setup();
    await docket.enqueue("email", { to: "x" });
    const handlers = { email: async () => void (await docket.enqueue("email", { to: "x" })) };
    await expect(drain(docket, { handlers, maxAttempts: 5 })).rejects.toThrow(/maxAttempts 5/);
    expect((await docket.list({ state: "running" })).length).toBe(0);
  });
});
