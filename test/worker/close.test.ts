/** docket.close() with workers: it stops them first (their jobs finish or are released), and a worker of a closed docket does not start. */
import { describe, expect, it } from "vitest";
import { ClosedError, Docket } from "../../src/index.ts";
import { memoryAdapter } from "../../src/memory.ts";

/**
 * A docket on a memory store (and a second handle on it, to read after the
 * close), one job of `task` enqueued, and a worker whose handler for it runs
 * `handle` once it has started; resolves once the handler runs.
 */
async function handling(task: string, handle: () => Promise<unknown>, options: { shutdownTimeoutMs?: number } = {}) {
  const adapter = memoryAdapter();
  const other = adapter.connect();
  const docket = new Docket({ adapter });
  await docket.migrate();
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const job = await docket.enqueue(task, {});
  const events: { type: string; message?: string }[] = [];
  const worker = docket.worker({
    queues: ["default"],
    pollMs: 10,
    logger: null,
    ...options,
    onEvent: (e) => void events.push({ type: e.type, ...(e.type === "error" ? { message: e.error.message } : {}) }),
    handlers: { [task]: () => (started(), handle()) },
  });
  await worker.start();
  await running;
  return { docket, other, job, worker, events };
}

describe("docket.close() and its workers", () => {
  it("stops a running worker before closing the adapter: the job in its handler finishes and is recorded (no lost lease, no spent attempt)", async () => {
    const { docket, other, job, worker, events } = await handling("slow", () => new Promise((r) => setTimeout(r, 100)));
    await docket.close();
    const after = await other.get({ id: job.id });
    expect([after?.state, after?.attempt]).toEqual(["succeeded", 1]);
    await new Promise((r) => setTimeout(r, 50));
    expect(events.filter((e) => e.type === "error")).toEqual([]);
    await expect(worker.start()).rejects.toThrow(ClosedError);
    await expect(docket.worker({ queues: ["default"], logger: null, handlers: { slow: () => undefined } }).start()).rejects.toThrow(ClosedError);
    await other.close();
  });

  it("a stop under way and close() together release the stuck job once (no lost event); close() stops a running scheduler, and a closed docket's scheduler does not start", async () => {
    const { docket, other, job, worker, events } = await handling("stuck", () => new Promise(() => undefined), { shutdownTimeoutMs: 100 });
    const passes: number[] = [];
    const scheduler = docket.scheduler({ intervalMs: 10, onError: () => void passes.push(1) });
    scheduler.start();
    await Promise.all([worker.stop({ timeoutMs: 100 }), docket.close()]);
    const after = await other.get({ id: job.id });
    expect([after?.state, after?.attempt]).toEqual(["ready", 0]);
    expect(events.filter((e) => e.type === "lost" || e.type === "error")).toEqual([]);
    expect(events.filter((e) => e.type === "released")).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 50));
    expect(passes).toEqual([]);
    expect(() => docket.scheduler().start()).toThrow(ClosedError);
    await other.close();
  });
});
