import { describe, expect, it } from "vitest";
import type { JobRecord } from "../../src/core/job.ts";
import { checkInvariants, controlInvariants, type OperationEvent, type RunRecord } from "../../src/testing/invariants.ts";

/** I14 (debounce) judged on hand-made histories: each clause reports what it guards, and a sound history passes. */
const I14 = controlInvariants.filter((i) => i.id === "I14");

function job(id: number, o: Partial<JobRecord> = {}): JobRecord {
  return {
    id, task: "t", queue: "qc", payload: '{"n":1}', state: "scheduled", priority: 0, runAt: 0, attempt: 0, maxAttempts: 2, backoff: null,
    concurrencyKey: null, onConflict: null, rateKey: null, fairKey: null, timeoutMs: null, leaseToken: null, leaseExpiresAt: null,
    createdAt: 0, updatedAt: 0, finishedAt: null, lastError: null, idempotencyKey: null, debounceKey: "d1", traceContext: null,
    result: null, progress: null, worker: null, errors: null, ...o,
  };
}

/** A debounced enqueue of payload n, returning job `id`, created or merged, over logical time [start, end]. */
function enqueue(label: string, start: number, end: number, id: number, n: number, created: boolean): OperationEvent {
  const payload = JSON.stringify({ n });
  return {
    kind: "operation", worker: label, name: "enqueue", label, start, end, effects: [],
    enqueued: [{ idempotencyKey: null, id, created, heldKey: null, debounceKey: "d1", payload }],
    ...(created ? { created: [job(id, { payload })] } : {}),
  };
}

/** A claim over [start, end] returning job `id` with payload n. */
function claim(label: string, start: number, end: number, id: number, n: number): OperationEvent {
  const result = job(id, { state: "running", attempt: 1, payload: JSON.stringify({ n }), debounceKey: null, leaseToken: "x", leaseExpiresAt: 1 });
  return { kind: "operation", worker: label, name: "claim", label, start, end, limit: 1, effects: [{ id, op: { kind: "claim", now: 0, leaseToken: "x", leaseExpiresAt: 1 }, result }] };
}

const run = (history: OperationEvent[], final: JobRecord[] = []): RunRecord => ({ initial: [], final, history });

describe("I14 (debounce) on hand-made histories", () => {
  it("a sound history passes: a merge, then the claim runs the merged payload, then the key's next job", () => {
    const h = [enqueue("e1", 1, 2, 1, 1, true), enqueue("e2", 3, 4, 1, 2, false), claim("c", 5, 6, 1, 2), enqueue("e3", 7, 8, 2, 3, true)];
    expect(checkInvariants(run(h, [job(1, { state: "succeeded", debounceKey: null }), job(2, { payload: '{"n":3}' })]), I14)).toEqual([]);
  });
  it("a merge into a job a claim had taken before the merge began is lost", () => {
    const h = [enqueue("e1", 1, 2, 1, 1, true), claim("c", 3, 4, 1, 1), enqueue("e2", 5, 6, 1, 2, false)];
    expect(checkInvariants(run(h), I14).join("\n")).toMatch(/e2 merged into #1, which c had claimed before it began/);
  });
  it("an enqueue that creates a second pending job while the first was pending", () => {
    const h = [enqueue("e1", 1, 2, 1, 1, true), enqueue("e2", 3, 4, 2, 2, true)];
    expect(checkInvariants(run(h), I14).join("\n")).toMatch(/e1 created #1 and e2 created #2 while #1 was still pending/);
  });
  it("a claim that runs a payload older than a merge that finished before the claim began", () => {
    const h = [enqueue("e1", 1, 2, 1, 1, true), enqueue("e2", 3, 4, 1, 2, false), claim("c", 5, 6, 1, 1)];
    expect(checkInvariants(run(h), I14).join("\n")).toMatch(/c returned #1 with e1's payload, though e2 merged after it and before the claim/);
  });
  it("a run that ends with two pending jobs of one key", () => {
    expect(checkInvariants(run([], [job(1), job(2, { state: "ready" })]), I14).join("\n")).toMatch(/ends with 2 pending jobs \[#1, #2\]/);
  });
});
