/**
 * docket/otel's consumer span follows the attempt, not the context the
 * worker was started in nor a handler that ignores its signal; its metrics
 * count reclaimed attempts; its inputs are checked. Adapter-independent: on
 * the memory adapter.
 */
import { context, SpanStatusCode } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { Docket, InvalidArgumentError } from "../../src/index.ts";
import { memoryAdapter } from "../../src/memory.ts";
import { openTelemetry } from "../../src/otel/index.ts";
import { ManualClock } from "../../src/core/clock.ts";

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

function traced() {
  const spans = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  return { spans, provider, otel: openTelemetry({ tracer: provider.getTracer("docket") }) };
}

const consumerSpans = (spans: InMemorySpanExporter) => spans.getFinishedSpans().filter((s) => s.name.startsWith("process "));

describe("docket/otel consumer spans", () => {
  it("are root spans linked to their producer, even when the worker was started inside an active span", async () => {
    const { spans, provider, otel } = traced();
    const docket = new Docket({ adapter: memoryAdapter(), tracing: otel.tracing });
    await docket.migrate();
    const worker = docket.worker({ logger: null, pollMs: 10, handlers: otel.handlers({ t: async () => "ok" }) });
    await provider.getTracer("app").startActiveSpan("startup", async (span) => {
      await worker.start();
      span.end();
    });
    const job = await docket.enqueue("t", null);
    await docket.waitFor(job.id, { timeoutMs: 10_000, pollMs: 5 });
    await worker.stop();
    await docket.close();
    const [process] = consumerSpans(spans);
    expect(process?.parentSpanContext).toBeUndefined();
    const send = spans.getFinishedSpans().find((s) => s.name === "send default")!;
    expect(process?.links[0]?.context.spanId).toBe(send.spanContext().spanId);
  });

  it("end with ERROR at the attempt's timeout (docket.outcome timed_out), though the handler ignores its signal; at a cancel, ERROR with docket.outcome cancelled", async () => {
    const { spans, otel } = traced();
    const docket = new Docket({ adapter: memoryAdapter(), tracing: otel.tracing });
    await docket.migrate();
    let running!: () => void;
    const started = new Promise<void>((r) => (running = r));
    const never = new Promise<void>(() => undefined);
    const worker = docket.worker({
      logger: null,
      pollMs: 10,
      concurrency: 2,
      handlers: otel.handlers({ deaf: () => never, cancelled: () => (running(), never) }),
    });
    await worker.start();
    const deaf = await docket.enqueue("deaf", null, { timeoutMs: 50, maxAttempts: 1 });
    expect((await docket.waitFor(deaf.id, { timeoutMs: 10_000, pollMs: 5 })).state).toBe("dead");
    const cancelled = await docket.enqueue("cancelled", null);
    await started;
    await docket.cancel(cancelled.id);
    await new Promise((r) => setTimeout(r, 50));
    const byId = (id: number) => consumerSpans(spans).find((s) => s.attributes["messaging.message.id"] === String(id));
    expect([byId(deaf.id)?.status.code, byId(deaf.id)?.attributes["docket.outcome"]]).toEqual([SpanStatusCode.ERROR, "timed_out"]);
    expect([byId(cancelled.id)?.status.code, byId(cancelled.id)?.attributes["docket.outcome"]]).toEqual([SpanStatusCode.ERROR, "cancelled"]);
    await worker.stop({ timeoutMs: 10 });
    await docket.close();
  });
});

describe("docket/otel producer spans", () => {
  it("a job a schedule fires (a due tick, runNow) is enqueued in a producer span and carries its context", async () => {
    const { spans, otel } = traced();
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 0, 30));
    const docket = new Docket({ adapter: memoryAdapter(), clock, tracing: otel.tracing });
    await docket.migrate();
    await docket.schedules.put("hourly", { cron: "0 * * * *", task: "report", payload: null });
    const now = await docket.schedules.runNow("hourly");
    clock.advance(3_600_000);
    const [tick] = await docket.schedules.runDue();
    await docket.close();
    const sends = spans.getFinishedSpans().filter((s) => s.name === "send default");
    expect(sends).toHaveLength(2);
    for (const job of [now, tick!.job]) expect(job.traceContext).toMatch(/traceparent/);
  });
});

describe("docket/otel metrics", () => {
  it("docket.job.failures counts an attempt a sweep reclaimed (its worker died), by its outcome", async () => {
    const clock = new ManualClock(1_000_000);
    const metricsOut = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter: metricsOut, exportIntervalMillis: 60_000 });
    const meterProvider = new MeterProvider({ readers: [reader] });
    const otel = openTelemetry({ meter: meterProvider.getMeter("docket") });
    const adapter = memoryAdapter();
    const docket = new Docket({ adapter, clock });
    await docket.migrate();
    const stop = otel.observe(docket);
    await docket.enqueue("t", null, { maxAttempts: 1 });
    const now = clock.now();
    // A worker that claimed it and died: its lease runs out.
    await adapter.claim({ queues: ["default"], limit: 1, now, leaseToken: "dead-worker", leaseExpiresAt: now + 1_000 });
    clock.advance(2_000);
    await docket.reclaimExpired();
    await reader.forceFlush();
    stop();
    await docket.close();
    const points = metricsOut
      .getMetrics()
      .flatMap((m) => m.scopeMetrics.flatMap((s) => s.metrics))
      .filter((m) => m.descriptor.name === "docket.job.failures")
      .flatMap((m) => m.dataPoints as { value: unknown; attributes: Record<string, unknown> }[]);
    expect(points.map((p) => [p.value, p.attributes["docket.outcome"]])).toEqual([[1, "dead"]]);
    await meterProvider.shutdown();
  });
});

describe("docket/otel input", () => {
  it("bad options and handlers are InvalidArgumentError, as the worker's own checks", () => {
    expect(() => openTelemetry({ depthIntervalMs: 0 })).toThrow(InvalidArgumentError);
    expect(() => openTelemetry({ tracer: {} as never })).toThrow(/tracer must be an OpenTelemetry Tracer/);
    expect(() => openTelemetry({ meter: 5 as never })).toThrow(/meter must be an OpenTelemetry Meter/);
    expect(() => openTelemetry({ tracr: null } as never)).toThrow(InvalidArgumentError);
    const otel = openTelemetry();
    expect(() => otel.handlers({ a: 5 as never })).toThrow(/handler for "a" must be a function/);
  });
});
