import { describe, expect, it } from "vitest";
import { Lifecycle } from "../../src/worker/state.ts";
import { LocalBuffer } from "../../src/worker/local-buffer.ts";
import { track } from "../../src/worker/attempt.ts";
import type { JobRecord } from "../../src/core/job.ts";

describe("worker modes", () => {
  it("the lifecycle goes idle → running → draining → releasing → stopped → running, and refuses any other step", () => {
    const life = new Lifecycle();
    expect(() => life.to("draining")).toThrow(/illegal state change idle → draining/);
    for (const next of ["running", "draining", "releasing", "stopped", "running"] as const) life.to(next);
    expect(life.started).toBe(true);
    expect(() => life.to("stopped")).toThrow(/running → stopped/);
  });

  it("the local buffer hands attempts out only while open, keeps what a late claim adds while draining, and releases them all", () => {
    const buffer = new LocalBuffer({ concurrency: 2, fixed: null, blocking: false, now: () => 1 });
    const inFlight = new Map();
    const attempt = (id: number) => track(inFlight, { id, leaseToken: "t", leaseExpiresAt: 10 } as JobRecord);
    expect(() => buffer.add(attempt(1))).toThrow(/closed/);
    buffer.open();
    buffer.add(attempt(2));
    expect(buffer.take()?.record.id).toBe(2);
    buffer.drain();
    buffer.add(attempt(3));
    expect(buffer.take()).toBeUndefined();
    expect(buffer.release().map((a) => a.record.id)).toEqual([3]);
    expect(buffer.mode).toBe("closed");
    expect(() => buffer.drain()).toThrow(/from closed to draining/);
    expect(buffer.size()).toBe(2);
  });
});
