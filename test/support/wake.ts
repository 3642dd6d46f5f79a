import type { Docket } from "../../src/index.ts";
import { until } from "./until.ts";

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
