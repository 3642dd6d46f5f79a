import { describe, expect, it } from "vitest";
import { LocalBuffer } from "../../src/worker/local-buffer.ts";
import { track } from "../../src/worker/attempt.ts";
import type { JobRecord } from "../../src/core/job.ts";

describe("the local buffer's lone fair keys", () => {
  const inFlight = new Map();
  const job = (id: number, queue: string, fairKey?: string | null) =>
    track(inFlight, { id, queue, leaseToken: `t${id}`, leaseExpiresAt: 10, fairKey: fairKey ?? null, ...(fairKey === undefined ? {} : { fairQueue: true }) } as JobRecord);
  const open = () => {
    const buffer = new LocalBuffer({ concurrency: 1, fixed: 100, blocking: false, now: () => 1 });
    buffer.open();
    return buffer;
  };
  const takeAll = (buffer: LocalBuffer) => {
    const ids: number[] = [];
    for (let a = buffer.take(); a; a = buffer.take()) ids.push(a.record.id);
    return ids;
  };

  it("a fair key with no other job buffered goes ahead of a flooding key's buffered jobs, after other lone keys, never ahead of another queue's", () => {
    const buffer = open();
    // Claimed first: another queue's job, then a flooding key's jobs with a lone key's between them.
    for (const a of [job(1, "plain"), job(2, "fair", "flood"), job(3, "fair", "x"), job(4, "fair", "flood"), job(5, "fair", "flood")]) buffer.add(a);
    // Claimed next: two keys coming back with one job each, a second job of x, and the flood's next.
    for (const a of [job(6, "fair", "y"), job(7, "fair", null), job(8, "fair", "x"), job(9, "fair", "flood")]) buffer.add(a);
    expect(takeAll(buffer)).toEqual([1, 6, 7, 2, 3, 4, 5, 8, 9]);
  });

  it("counts keys as jobs are taken: a key whose buffered jobs were all taken is lone again", () => {
    const buffer = open();
    for (const a of [job(1, "fair", "a"), job(2, "fair", "b"), job(3, "fair", "b")]) buffer.add(a);
    expect(buffer.take()?.record.id).toBe(1);
    // a has nothing buffered now; b has two.
    buffer.add(job(4, "fair", "a"));
    buffer.add(job(5, "fair", "a"));
    expect(takeAll(buffer)).toEqual([4, 2, 3, 5]);
    // Released jobs are forgotten too.
    buffer.add(job(6, "fair", "b"));
    buffer.add(job(7, "fair", "b"));
    buffer.drain();
    expect(buffer.release().map((a) => a.record.id)).toEqual([6, 7]);
  });
});
