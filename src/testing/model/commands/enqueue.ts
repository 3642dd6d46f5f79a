import type { AsyncCommand } from "fast-check";
import { expectSameList, expectSameStore, type ModelState, type RealSystem } from "./context.ts";

export interface EnqueueSpec {
  queue: string;
  priority: number;
  /** 0 = ready now; otherwise scheduled `delayMs` ahead. */
  delayMs: number;
  maxAttempts: number;
}

/** enqueue(jobs): all stored in one transaction, in input order. */
export class EnqueueCommand implements AsyncCommand<ModelState, RealSystem> {
  constructor(readonly jobs: readonly EnqueueSpec[]) {}
  check(): boolean {
    return true;
  }
  async run(m: ModelState, r: RealSystem): Promise<void> {
    const jobs = this.jobs.map((j) => ({
      task: "t",
      queue: j.queue,
      payload: "{}",
      state: j.delayMs > 0 ? ("scheduled" as const) : ("ready" as const),
      priority: j.priority,
      runAt: m.now + j.delayMs,
      maxAttempts: j.maxAttempts,
      backoff: null,
    }));
    const got = await r.adapter.enqueue({ jobs, now: m.now });
    const modelled = m.store.enqueue(jobs, got.map((g) => g.id), m.now);
    expectSameList(this.toString(), modelled, got);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    return `enqueue(${this.jobs.map((j) => `${j.queue}/p${j.priority}${j.delayMs ? `+${j.delayMs}ms` : ""}/max${j.maxAttempts}`).join(", ")})`;
  }
}
