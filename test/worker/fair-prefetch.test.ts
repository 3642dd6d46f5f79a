import { describe, expect, it } from "vitest";
import { LocalBuffer } from "../../src/worker/local-buffer.ts";
import { track } from "../../src/worker/attempt.ts";
import type { JobRecord } from "../../src/core/job.ts";

describe("the automatic prefetch of a fair queue's worker", () => {
  it("holds at most 200 jobs while the worker takes a fair queue's jobs, at most 2,000 a second after the last; ~250 ms of work either way", () => {
    let now = 1;
    const buffer = new LocalBuffer({ concurrency: 1, fixed: null, blocking: false, now: () => now });
    const inFlight = new Map();
    const attempt = (id: number, fair: boolean) => track(inFlight, { id, leaseToken: `t${id}`, leaseExpiresAt: 10, ...(fair ? { fairQueue: true } : {}) } as JobRecord);
    buffer.open();
    buffer.size();
    // 10 jobs a millisecond, measured over one sample: 250 ms of work is 2,500 jobs.
    for (let i = 0; i < 1000; i++) buffer.finished();
    now += 100;
    expect(buffer.size()).toBe(2000);
    buffer.add(attempt(1, false));
    expect(buffer.size()).toBe(2000);
    buffer.add(attempt(2, true));
    expect(buffer.size()).toBe(200);
    now += 999;
    for (let i = 0; i < 9990; i++) buffer.finished();
    expect(buffer.size()).toBe(200);
    now += 1;
    expect(buffer.size()).toBe(2000);
    // Slow jobs of a fair queue: 0.4 a millisecond is 100 jobs in 250 ms, under the cap.
    buffer.add(attempt(3, true));
    for (let i = 0; i < 20; i++) {
      now += 100;
      for (let k = 0; k < 40; k++) buffer.finished();
      buffer.size();
    }
    expect(buffer.size()).toBe(100);
  });
});
