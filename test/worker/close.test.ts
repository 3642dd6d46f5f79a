/** docket.close() with workers: it stops them first (their jobs finish or are released), and a worker of a closed docket does not start. */
import { describe, expect, it } from "vitest";
import { ClosedError, Docket } from "../../src/index.ts";
import { memoryAdapter } from "../../src/memory.ts";

describe("docket.close() and its workers", () => {
  it("stops a running worker before closing the adapter: the job in its handler finishes and is recorded (no lost lease, no spent attempt)", async () => {
    const adapter = memoryAdapter();
    const other = adapter.connect();
    const docket = new Docket({ adapter });
    await docket.migrate();
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const job = await docket.enqueue("slow", {});
    const errors: string[] = [];
    const worker = docket.worker({
      queues: ["default"],
      pollMs: 10,
      logger: null,
      onEvent: (e) => void (e.type === "error" && errors.push(e.error.message)),
      handlers: { slow: async () => (started(), await new Promise((r) => setTimeout(r, 100))) },
    });
    await worker.start();
    await running;
    await docket.close();
    const after = await other.get({ id: job.id });
    expect([after?.state, after?.attempt]).toEqual(["succeeded", 1]);
    await new Promise((r) => setTimeout(r, 50));
    expect(errors).toEqual([]);
    await expect(worker.start()).rejects.toThrow(ClosedError);
    await expect(docket.worker({ queues: ["default"], logger: null, handlers: { slow: () => undefined } }).start()).rejects.toThrow(ClosedError);
    await other.close();
  });

  it("a stop under way and close() together release the stuck job once (no lost event); close() stops a running scheduler, and a closed docket's scheduler does not start", async () => {
    const adapter = memoryAdapter();
    const other = adapter.connect();
    const docket = new Docket({ adapter });
    await docket.migrate();
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const job = await docket.enqueue("stuck", {});
    const events: string[] = [];
    const worker = docket.worker({
      queues: ["default"],
      pollMs: 10,
      shutdownTimeoutMs: 100,
      logger: null,
      onEvent: (e) => void events.push(e.type),
      handlers: { stuck: () => (started(), new Promise(() => undefined)) },
    });
    const passes: number[] = [];
    const scheduler = docket.scheduler({ intervalMs: 10, onError: () => void passes.push(1) });
    scheduler.start();
    await worker.start();
    await running;
    await Promise.all([worker.stop({ timeoutMs: 100 }), docket.close()]);
    const after = await other.get({ id: job.id });
    expect([after?.state, after?.attempt]).toEqual(["ready", 0]);
    expect(events.filter((t) => t === "lost" || t === "error")).toEqual([]);
    expect(events.filter((t) => t === "released")).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 50));
    expect(passes).toEqual([]);
    expect(() => docket.scheduler().start()).toThrow(ClosedError);
    await other.close();
  });
});
