/** Durable steps in a worker: `ctx.step` (see JobContext.step). */
import type { WorkerHost } from "./host.ts";
import type { JobRecord } from "../core/job.ts";
import { InvalidArgumentError, LeaseLostError, PayloadTooLargeError } from "../core/errors.ts";
import { shown } from "../core/shown.ts";
import { appendStep, readSteps, repeatedStep, validateStepName, type Step } from "../core/steps.ts";
import { serializePayload, utf8Bytes } from "../core/validate.ts";

/** The type of `ctx.step` (see JobContext.step). */
export type StepFunction = <T>(name: string, fn: () => T | Promise<T>) => Promise<T>;

/**
 * `ctx.step` for one attempt of `record`: the steps as the claim read them,
 * the names this attempt used, and the step records written one after
 * another (each writes the whole list, so none may overtake another).
 * `beforeRun` may throw to refuse a step that would run (and write) now.
 */
export function stepsOf(host: WorkerHost, record: JobRecord, beforeRun: (name: string) => void = () => undefined): StepFunction {
  // Parsed once, at the first step: the recorded steps, then this attempt's as they are written.
  let recorded: Step[] | null = null;
  let used: Set<string> | null = null;
  let writes: Promise<unknown> = Promise.resolve();
  return async <T>(name: string, fn: () => T | Promise<T>): Promise<T> => {
    const checked = validateStepName(name);
    // Checked before the name is taken: a refused call leaves the name free for a correct one.
    if (typeof fn !== "function") throw new InvalidArgumentError(`ctx.step(${JSON.stringify(checked)}, fn): fn must be a function, got ${shown(fn)}`);
    used ??= new Set();
    if (used.has(checked)) throw repeatedStep(checked);
    recorded ??= readSteps(record.steps);
    const done = recorded.find((s) => s.name === checked);
    // A step to run and record may be refused here (`beforeRun`); the name is taken only past this point.
    if (done === undefined) beforeRun(checked);
    used.add(checked);
    if (done !== undefined) return done.result as T;
    const value = await fn();
    const known = host.payloadLimit();
    const limit = typeof known === "number" ? known : await known;
    let text: string;
    try {
      text = serializePayload(value === undefined ? null : value, limit, `the result of step ${JSON.stringify(checked)}`);
    } catch (error) {
      if (error instanceof PayloadTooLargeError) throw new PayloadTooLargeError(error.bytes, error.limit, `the result of step ${JSON.stringify(checked)}`);
      throw error;
    }
    const write = writes.then(async () => {
      const now = host.clock.now();
      const next = appendStep(recorded!, checked, text, now);
      const steps = JSON.stringify(next);
      // The list is stored as one value: bounded as a payload is, on every adapter alike (MariaDB could not store more than its packet).
      const bytes = utf8Bytes(steps);
      if (bytes > limit) throw new PayloadTooLargeError(bytes, limit, `the steps of job ${record.id} with step ${JSON.stringify(checked)}: a job's steps are stored together, and their results together must fit the limit`);
      if (!(await host.adapter.recordStep({ id: record.id, leaseToken: record.leaseToken!, now, steps }))) throw new LeaseLostError(record.id, `step ${JSON.stringify(checked)} not recorded`);
      recorded = next;
    });
    writes = write.catch(() => undefined);
    await write;
    return JSON.parse(text) as T;
  };
}
