import { describe, expect, it } from "vitest";
import { PausedQueues } from "../../src/worker/paused-queues.ts";

/** What a worker knows of its queues' pauses (src/worker/paused-queues.ts): each fact dated, an older one never undoes a newer. */
describe("PausedQueues", () => {
  it("a queue learned paused is paused, and learning it reports the change once", () => {
    const p = new PausedQueues();
    expect(p.paused("q")).toBe(false);
    expect(p.learn("q", true, 100)).toBe(true);
    expect(p.learn("q", true, 200)).toBe(false);
    expect(p.paused("q")).toBe(true);
    expect(p.any).toBe(true);
  });

  it("a read begun before the pause was learned does not undo it; one begun after does", () => {
    const p = new PausedQueues();
    p.learn("q", true, 100);
    p.learn("q", false, 99);
    expect(p.paused("q")).toBe(true);
    p.learn("q", false, 101);
    expect(p.paused("q")).toBe(false);
    expect(p.any).toBe(false);
  });

  it("a claim that returned the queue's jobs shows it resumed only if it began strictly after the pause was learned", () => {
    const p = new PausedQueues();
    p.learn("q", true, 100);
    p.claimed(["q"], 99);
    p.claimed(["q"], 100);
    expect(p.paused("q")).toBe(true);
    p.claimed(["q"], 101);
    expect(p.paused("q")).toBe(false);
  });

  it("a claim of a queue it knows nothing of changes nothing", () => {
    const p = new PausedQueues();
    p.claimed(["other"], 100);
    expect(p.any).toBe(false);
    expect(p.paused("other")).toBe(false);
  });
});
