import { describe, expectTypeOf, it } from "vitest";
import { Docket, type EnqueueItem, type Job } from "../../src/index.ts";
import type { Schedule } from "../../src/core/schedules.ts";

/**
 * What a typed Docket refuses at compile time. `npm run typecheck` checks
 * this file (tsconfig includes test/types): each `@ts-expect-error` line must
 * fail to compile, or the typecheck fails. The calls run nowhere (`typed`
 * is never constructed, and every assertion is on types only).
 */
type Tasks = {
  "email.send": { to: string };
  "report.build": { month: number };
  "cache.flush": null;
};
declare const typed: Docket<Tasks>;
declare const untyped: Docket;
const never = false;

describe("types", () => {
  it("enqueue: the payload is the named task's", () => {
    if (never) {
      void typed.enqueue("email.send", { to: "a@example.com" });
      // @ts-expect-error: a payload of another task
      void typed.enqueue("email.send", { month: 3 });
      // @ts-expect-error: an unknown task
      void typed.enqueue("email.sned", { to: "a@example.com" });
    }
    expectTypeOf<Parameters<Docket<Tasks>["enqueue"]>[0]>().toEqualTypeOf<"email.send" | "report.build" | "cache.flush">();
  });

  it("enqueueMany: each item's payload is its own task's", () => {
    if (never) {
      void typed.enqueueMany([
        { task: "email.send", payload: { to: "a@example.com" } },
        { task: "report.build", payload: { month: 3 }, ref: "r" },
      ]);
      // @ts-expect-error: report.build's payload under email.send
      void typed.enqueueMany([{ task: "email.send", payload: { month: 3 } }]);
      // @ts-expect-error: an unknown task
      void typed.enqueueMany([{ task: "nope", payload: {} }]);
    }
    expectTypeOf<EnqueueItem<Tasks>>().toEqualTypeOf<
      | { task: "email.send"; payload: { to: string }; options?: EnqueueItem<Tasks>["options"]; ref?: string }
      | { task: "report.build"; payload: { month: number }; options?: EnqueueItem<Tasks>["options"]; ref?: string }
      | { task: "cache.flush"; payload: null; options?: EnqueueItem<Tasks>["options"]; ref?: string }
    >();
  });

  it("schedules.put: a known task with its payload (optional only where the payload may be null)", () => {
    if (never) {
      void typed.schedules.put("monthly", { cron: "0 0 1 * *", task: "report.build", payload: { month: 1 } });
      void typed.schedules.put("flush", { cron: "@hourly", task: "cache.flush" });
      // @ts-expect-error: the wrong payload
      void typed.schedules.put("monthly", { cron: "0 0 1 * *", task: "report.build", payload: { to: "x" } });
      // @ts-expect-error: a payload is required for this task
      void typed.schedules.put("monthly", { cron: "0 0 1 * *", task: "report.build" });
      // @ts-expect-error: an unknown task
      void typed.schedules.put("x", { cron: "@hourly", task: "nope" });
      // Untyped: any task and payload.
      void untyped.schedules.put("x", { cron: "@hourly", task: "anything", payload: { any: 1 } });
    }
    expectTypeOf<ReturnType<Docket<Tasks>["schedules"]["put"]>>().toEqualTypeOf<Promise<Schedule>>();
  });

  it("worker handlers (the Quick start's): each handler's payload is its task's; a handler for an unknown task does not compile", () => {
    if (never) {
      typed.worker({
        handlers: {
          "email.send": async (payload, ctx) => {
            expectTypeOf(payload).toEqualTypeOf<{ to: string }>();
            expectTypeOf(ctx.job.attempt).toEqualTypeOf<number>();
          },
          // @ts-expect-error: the payload of another task
          "report.build": async (payload: { to: string }) => void payload,
        },
      });
      // @ts-expect-error: no such task
      typed.worker({ handlers: { "email.sned": async () => undefined } });
    }
  });

  it("list: task is one of the Docket's tasks", () => {
    if (never) {
      void typed.list({ task: "email.send", state: "ready" });
      // @ts-expect-error: an unknown task
      void typed.list({ task: "email.sned" });
      void untyped.list({ task: "anything" });
    }
    expectTypeOf<NonNullable<Parameters<Docket<Tasks>["list"]>[0]>["task"]>().toEqualTypeOf<"email.send" | "report.build" | "cache.flush" | undefined>();
    expectTypeOf<ReturnType<Docket<Tasks>["list"]>>().toEqualTypeOf<Promise<Job[]>>();
  });

  it("get, waitFor, getByIdempotencyKey: testing the task narrows the payload; untyped, the payload is unknown", () => {
    if (never) {
      void typed.get(1).then((job) => {
        if (job?.task === "email.send") expectTypeOf(job.payload).toEqualTypeOf<{ to: string }>();
        if (job?.task === "report.build") expectTypeOf(job.payload).toEqualTypeOf<{ month: number }>();
        // @ts-expect-error: a task the Docket does not have
        if (job?.task === "nope") return;
      });
      void typed.waitFor(1).then((job) => {
        if (job.task === "cache.flush") expectTypeOf(job.payload).toEqualTypeOf<null>();
        // @ts-expect-error: without narrowing, the payload is any of the tasks'
        void job.payload.to;
      });
      void typed.getByIdempotencyKey("k").then((job) => {
        if (job?.task === "email.send") expectTypeOf(job.payload.to).toEqualTypeOf<string>();
      });
      void untyped.get(1).then((job) => expectTypeOf(job!.payload).toEqualTypeOf<unknown>());
    }
  });
});
