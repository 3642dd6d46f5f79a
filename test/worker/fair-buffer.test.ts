import { describe, expect, it } from "vitest";
import { LocalBuffer } from "../../src/worker/local-buffer.ts";
import { track } from "../../src/worker/attempt.ts";
import type { JobRecord } from "../../src/core/job.ts";

describe("the local buffer's fair order", () => {
  const inFlight = new Map();
  const attempt = (id: number, queue: string, fairPlace?: number) =>
    track(inFlight, { id, queue, leaseToken: `t${id}`, leaseExpiresAt: 10, ...(fairPlace === undefined ? {} : { fairPlace }) } as JobRecord);
  const ids = (buffer: LocalBuffer) => {
    buffer.drain();
    return buffer.release().map((a) => a.record.id);
  };

  it("starts a fair queue's buffered jobs in place order across claims, and leaves other queues' and unplaced jobs where they were", () => {
    const buffer = new LocalBuffer({ concurrency: 1, fixed: 100, blocking: false, now: () => 1 });
    buffer.open();
    // A first claim buffered a flooding key's places 10..40, beside a plain queue's job and an unplaced (untagged) one.
    buffer.add([attempt(1, "fair", 10), attempt(2, "fair", 20), attempt(3, "other"), attempt(4, "fair", 30), attempt(5, "fair"), attempt(6, "fair", 40)]);
    // The next claim took a small key's job placed at the head (15) and the flood's next place (50).
    buffer.add([attempt(7, "fair", 15), attempt(8, "other"), attempt(9, "fair", 50), attempt(10, "fair")]);
    expect(ids(buffer)).toEqual([1, 7, 2, 3, 4, 5, 6, 8, 9, 10]);
  });

  it("ties on a place go by id, and an empty buffer takes a claim in the claim's order", () => {
    const buffer = new LocalBuffer({ concurrency: 1, fixed: 100, blocking: false, now: () => 1 });
    buffer.open();
    buffer.add([attempt(1, "fair", 20), attempt(3, "fair", 20)]);
    buffer.add([attempt(2, "fair", 20), attempt(4, "fair", 5)]);
    expect(ids(buffer)).toEqual([4, 1, 2, 3]);
  });
});
