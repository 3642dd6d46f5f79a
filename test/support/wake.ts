import type { Docket } from "../../src/index.ts";
import { until } from "./until.ts";

/**
 * A cap slot freed in another process wakes an idle worker here: queue
 * "capped" has a cap of 1; `producer`'s worker runs a job there and holds
 * the slot; `consumer`'s worker (an hour's pollMs) finds the cap full and
 * goes idle; when the producer's job succeeds, the consumer's job must
 * start within 5 s. Throws "timed out waiting for: …" if not.
 */
export async function idleWorkerWakesForFreedCapSlot(consumer: Docket, producer: Docket): Promise<void> {
  await producer.setQueueCap("capped", 1);
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let holding = false;
  const p = producer.worker({ queues: ["capped"], handlers: { hold: async () => void ((holding = true), await held) }, pollMs: 20, logger: null });
  const started: number[] = [];
  const c = consumer.worker({ queues: ["capped"], handlers: { after: () => undefined }, pollMs: 3_600_000, logger: null, onEvent: (e) => void (e.type === "started" && started.push(e.job.id)) });
  await p.start();
  await c.start();
  try {
    await producer.enqueue("hold", {}, { queue: "capped" });
    await until(() => holding, 5_000, "the producer's worker holds the cap's one slot");
    const job = await producer.enqueue("after", {}, { queue: "capped" });
    // The consumer is woken by the enqueue, finds the cap full, and goes idle.
    await new Promise((r) => setTimeout(r, 300));
    if (started.includes(job.id)) throw new Error("the consumer started a job past the cap of 1");
    release();
    await until(() => started.includes(job.id), 5_000, "the idle worker started the capped queue's job when another process freed the slot");
  } finally {
    release();
    await c.stop();
    await p.stop();
  }
}

/**
 * The wake-up scenario every adapter with cross-connection notices passes:
 * `consumer`'s worker, with an hour's pollMs, goes idle; a job `producer`
 * (another connection to the same store) enqueues must start within 5 s,
 * and so must a dead job `producer` replays (scheduled and due: the notice
 * must make the worker stage it). Throws "timed out waiting for: …" if not.
 */
export async function idleWorkerWakesForOtherConnection(consumer: Docket, producer: Docket): Promise<void> {
  const started: number[] = [];
  let failNext = true;
  const handlers = {
    t: () => undefined,
    flaky: () => {
      if (failNext) {
        failNext = false;
        throw new Error("first attempt fails");
      }
    },
  };
  const w = consumer.worker({ handlers, pollMs: 3_600_000, logger: null, onEvent: (e) => void (e.type === "started" && started.push(e.job.id)) });
  await w.start();
  try {
    // Let the worker poll once and go idle with its notices subscribed.
    await new Promise((r) => setTimeout(r, 300));
    const job = await producer.enqueue("t", {});
    await until(() => started.includes(job.id), 5_000, "the idle worker started a job enqueued through another connection");
    const flaky = await producer.enqueue("flaky", {}, { maxAttempts: 1 });
    await until(async () => (await producer.get(flaky.id))?.state === "dead", 5_000, "the flaky job is dead");
    await producer.deadLetters.replay(flaky.id);
    await until(async () => (await producer.get(flaky.id))?.state === "succeeded", 5_000, "the replayed job ran");
  } finally {
    await w.stop();
  }
}
