import type { AsyncCommand } from "fast-check";
import { expectSameList, expectSameStore, fail, type ModelState, type RealSystem } from "./context.ts";

export interface EnqueueSpec {
  queue: string;
  priority: number;
  /** 0 = ready now; otherwise scheduled `delayMs` ahead. */
  delayMs: number;
  maxAttempts: number;
  task: string;
  /** A concurrency key (its limit and onConflict), or null. */
  concurrency: { key: string; limit: number; onConflict: "block" | "discard" } | null;
  /** An idempotency key, or null. */
  idempotencyKey?: string | null;
  /** A rate key (its limit and period), or null. */
  rateLimit?: { key: string; limit: number; periodMs: number } | null;
  /**
   * A debounce key, or null. A debounced job is never keyed or idempotent (the client refuses those
   * combinations): with one, `concurrency` and `idempotencyKey` are dropped, the job goes to queue "a"
   * (so bursts of one key meet) and is scheduled `debounce.delayMs` ahead.
   */
  debounce?: { key: string; delayMs: number; maxWaitMs: number | null } | null;
  /**
   * Parents, as job picks (ModelState.pickJob) resolved when the command runs, each once; -1 names a job that does
   * not exist. Ignored beside a debounce key (the client refuses the combination) or when no job is stored.
   */
  parents?: readonly number[];
}

/** enqueue(jobs): all stored in one transaction, in input order; or none, refused, when a key is held by another task. */
export class EnqueueCommand implements AsyncCommand<ModelState, RealSystem> {
  constructor(readonly jobs: readonly EnqueueSpec[]) {}
  check(): boolean {
    return true;
  }
  async run(m: ModelState, r: RealSystem): Promise<void> {
    const after = (j: EnqueueSpec) => {
      if (j.debounce || !j.parents?.length || m.store.jobs.size === 0) return {};
      const ids = [...new Set(j.parents.map((p) => (p < 0 ? 999_999 : m.pickJob(p)!)))];
      return { after: { ids, refs: [] } };
    };
    const jobs = this.jobs.map((j) =>
      j.debounce
        ? {
            task: j.task,
            queue: "a",
            payload: "{}",
            state: "scheduled" as const,
            priority: j.priority,
            runAt: m.now + j.debounce.delayMs,
            maxAttempts: j.maxAttempts,
            backoff: null,
            concurrency: null,
            idempotencyKey: null,
            debounce: j.debounce,
          }
        : {
            task: j.task,
            queue: j.queue,
            payload: "{}",
            state: j.delayMs > 0 ? ("scheduled" as const) : ("ready" as const),
            priority: j.priority,
            runAt: m.now + j.delayMs,
            maxAttempts: j.maxAttempts,
            backoff: null,
            concurrency: j.concurrency,
            idempotencyKey: j.idempotencyKey ?? null,
            rateLimit: j.rateLimit ?? null,
            ...after(j),
          },
    );
    const refused = m.store.parentsRefused(jobs);
    if (refused !== null) {
      const error = await r.adapter.enqueue({ jobs, now: m.now }).then(
        () => null,
        (e: { code?: string }) => e,
      );
      if (error?.code !== refused) fail(this.toString(), [`model says ${refused} (a parent missing, dead or cancelled); actual: ${error === null ? "stored" : String(error.code)}`]);
      await expectSameStore(this.toString(), m, r);
      return;
    }
    if (m.store.idempotencyConflict(jobs)) {
      const refused = await r.adapter.enqueue({ jobs, now: m.now }).then(
        () => null,
        (error: { code?: string }) => error,
      );
      if (refused?.code !== "IDEMPOTENCY_CONFLICT") fail(this.toString(), [`model says IDEMPOTENCY_CONFLICT (a key held by another task); actual: ${refused === null ? "stored" : String(refused.code)}`]);
      await expectSameStore(this.toString(), m, r);
      return;
    }
    const got = await r.adapter.enqueue({ jobs, now: m.now });
    const modelled = m.store.enqueue(jobs, got.map((g) => g.id), m.now);
    expectSameList(this.toString(), modelled, got);
    const created = (list: readonly { created: boolean }[]) => list.map((x) => x.created).join(",");
    if (created(modelled) !== created(got)) fail(this.toString(), [`created: model ${created(modelled)} ≠ actual ${created(got)}`]);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    const key = (j: EnqueueSpec) =>
      j.debounce
        ? `/deb:${j.debounce.key}+${j.debounce.delayMs}ms${j.debounce.maxWaitMs === null ? "" : `≤${j.debounce.maxWaitMs}ms`}`
        : (j.concurrency ? `/${j.concurrency.key}≤${j.concurrency.limit}${j.concurrency.onConflict === "discard" ? "!" : ""}` : "") + (j.idempotencyKey ? `/idem:${j.idempotencyKey}` : "") +
          (j.rateLimit ? `/rate:${j.rateLimit.key}≤${j.rateLimit.limit}/${j.rateLimit.periodMs}ms` : "") +
          (j.parents?.length ? `/after:${j.parents.join("+")}` : "");
    return `enqueue(${this.jobs.map((j) => `${j.debounce ? "a" : j.queue}/${j.task}/p${j.priority}${j.delayMs ? `+${j.delayMs}ms` : ""}/max${j.maxAttempts}${key(j)}`).join(", ")})`;
  }
}
