import { expect, test } from "vitest";
import { LazyAbort } from "../../src/worker/lazy-abort.ts";

test("a signal read before the abort is aborted by it, with its reason", () => {
  const abort = new LazyAbort();
  const signal = abort.signal;
  expect(signal.aborted).toBe(false);
  expect(abort.aborted).toBe(false);
  const seen: unknown[] = [];
  signal.addEventListener("abort", () => seen.push(signal.reason));
  const reason = new Error("stop");
  abort.abort(reason);
  expect(signal.aborted).toBe(true);
  expect(seen).toEqual([reason]);
  expect(abort.signal).toBe(signal);
});

test("a signal first read after the abort is already aborted, with the first abort's reason", () => {
  const abort = new LazyAbort();
  const first = new Error("timeout");
  abort.abort(first);
  abort.abort(new Error("stopping"));
  expect(abort.aborted).toBe(true);
  expect(abort.reason).toBe(first);
  expect(abort.signal.aborted).toBe(true);
  expect(abort.signal.reason).toBe(first);
});

test("a later abort does not replace the reason a read signal carries", () => {
  const abort = new LazyAbort();
  const signal = abort.signal;
  const first = new Error("lost");
  abort.abort(first);
  abort.abort(new Error("stopping"));
  expect(signal.reason).toBe(first);
  expect(abort.reason).toBe(first);
});
