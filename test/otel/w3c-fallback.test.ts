import { context, propagation, SpanKind, TraceFlags } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { Docket } from "../../src/client/docket.ts";
import { sqliteAdapter } from "../../src/adapters/sqlite/index.ts";
import { openTelemetry } from "../../src/otel/index.ts";
import { spanContextOfTraceparent, traceparentOf } from "../../src/otel/trace-context.ts";

/** No global propagator (the API's default writes nothing): docket stores and reads the W3C header itself. */
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
propagation.disable();

describe("OpenTelemetry without a global propagator", () => {
  it("the consumer span still links to the producer span: docket stores the W3C traceparent itself", async () => {
    const spans = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
    const otel = openTelemetry({ tracer: tracerProvider.getTracer("docket") });
    const docket = new Docket({ adapter: sqliteAdapter({ filename: ":memory:" }), tracing: otel.tracing });
    await docket.migrate();
    const job = await docket.enqueue("email", { to: "a@example.com" }, { queue: "mail" });
    expect(JSON.parse(job.traceContext!)).toEqual({ traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/) });
    const worker = docket.worker({ queues: ["mail"], pollMs: 20, logger: null, handlers: otel.handlers({ email: async () => "sent" }) });
    await worker.start();
    await docket.waitFor(job.id, { timeoutMs: 10_000, pollMs: 20 });
    await worker.stop();
    const send = spans.getFinishedSpans().find((s) => s.name === "send mail")!;
    const process = spans.getFinishedSpans().find((s) => s.name === "process mail")!;
    expect(send.kind).toBe(SpanKind.PRODUCER);
    expect(process.links[0]?.context).toMatchObject({ traceId: send.spanContext().traceId, spanId: send.spanContext().spanId, isRemote: true });
    await tracerProvider.shutdown();
    await docket.close();
  });

  it("traceparent round trip, and the headers the Trace Context rules refuse", () => {
    const span = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", traceFlags: TraceFlags.SAMPLED };
    const carrier = traceparentOf(span);
    expect(carrier).toEqual({ traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" });
    expect(spanContextOfTraceparent(carrier)).toEqual({ ...span, isRemote: true });
    expect(traceparentOf(undefined)).toEqual({});
    expect(traceparentOf({ ...span, traceId: "0".repeat(32) })).toEqual({});
    for (const bad of [
      "",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
    ]) {
      expect(spanContextOfTraceparent({ traceparent: bad }), bad).toBeNull();
    }
    // A later version may carry more fields: the first four are read.
    expect(spanContextOfTraceparent({ traceparent: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more" })?.spanId).toBe("00f067aa0ba902b7");
  });
});
