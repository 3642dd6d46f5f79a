/** ctx.signal.reason names why the handler's signal aborted: its time limit, a lost lease (a cancel), or the worker's stop. */
import { describe, expect, it } from "vitest";
import { Docket, JobLeaseLostError, JobTimeoutError, WorkerStoppingError } from "../../src/index.ts";
import { memoryAdapter } from "../../src/memory.ts";

/** Runs one job whose handler waits for its signal; `act` aborts it somehow. Resolves with the signal's reason and the job as stored. */
async function reasonOf(act: (docket: Docket, worker: ReturnType<Docket["worker"]>, id: number) => Promise<unknown>, timeoutMs?: number) {
  const docket = new Docket({ adapter: memoryAdapter() });
  await docket.migrate();
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  let reason: unknown;
  const job = await docket.enqueue("wait", {}, timeoutMs === undefined ? {} : { timeoutMs });
  const worker = docket.worker({
    queues: ["default"],
    pollMs: 10,
    logger: null,
    handlers: {
      wait: (_payload, ctx) =>
        new Promise<string>((resolve) => {
          started();
          ctx.signal.addEventListener("abort", () => ((reason = ctx.signal.reason), resolve("finished after the abort")));
        }),
    },
  });
  await worker.start();
  await running;
  await act(docket, worker, job.id);
  await new Promise((r) => setTimeout(r, 50));
  await worker.stop();
  const stored = await docket.get(job.id);
  await docket.close();
  return { reason, stored };
}

describe("ctx.signal.reason", () => {
  it("a timeout: JobTimeoutError with the limit, and the attempt failed", async () => {
    const { reason, stored } = await reasonOf(() => new Promise((r) => setTimeout(r, 100)), 30);
    expect(reason).toBeInstanceOf(JobTimeoutError);
    expect((reason as JobTimeoutError).timeoutMs).toBe(30);
    expect(stored?.lastError).toMatch(/timed out after 30 ms/);
  });

  it("a cancel: JobLeaseLostError with cancelled true, and the job stays cancelled", async () => {
    const { reason, stored } = await reasonOf((docket, _worker, id) => docket.cancel(id));
    expect(reason).toBeInstanceOf(JobLeaseLostError);
    expect((reason as JobLeaseLostError).cancelled).toBe(true);
    expect(stored?.state).toBe("cancelled");
  });

  it("a stop: WorkerStoppingError, and what the handler returns within the stop's timeout is recorded", async () => {
    const { reason, stored } = await reasonOf((_docket, worker) => worker.stop());
    expect(reason).toBeInstanceOf(WorkerStoppingError);
    expect([stored?.state, stored?.result]).toEqual(["succeeded", "finished after the abort"]);
  });
});
