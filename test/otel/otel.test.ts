import { context, propagation, SpanKind } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Docket } from "../../src/client/docket.ts";
import { openTelemetry } from "../../src/otel/index.ts";
import type { DisposableTarget, TargetName } from "../support/targets.ts";
import { openTarget } from "../support/targets.ts";

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
propagation.setGlobalPropagator(new W3CTraceContextPropagator());

/** Spans exported by the OpenTelemetry SDK's in-memory exporter, and metrics, on every adapter. */
for (const name of ["sqlite", "postgres", "mysql"] as TargetName[]) {
  describe(`${name}: OpenTelemetry`, () => {
    let target: DisposableTarget | null = null;
    beforeAll(async () => void (target = await openTarget(name)));
    afterAll(async () => target?.dispose());
    it("a producer span per enqueue, a consumer span per attempt linked to it (trace context stored with the job), handler spans nested; metrics recorded", async (ctx) => {
      if (!target) return ctx.skip();
      const { store, adapter, spans, tracerProvider } = await tracedStore(target);
      const tracer = tracerProvider.getTracer("app");
      const metricsOut = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
      const reader = new PeriodicExportingMetricReader({ exporter: metricsOut, exportIntervalMillis: 60_000 });
      const meterProvider = new MeterProvider({ readers: [reader] });
      const otel = openTelemetry({ tracer: tracerProvider.getTracer("docket"), meter: meterProvider.getMeter("docket"), depthIntervalMs: 50 });
      const docket = new Docket({ adapter, tracing: otel.tracing });
      const stopMetrics = otel.observe(docket);
      const job = await tracer.startActiveSpan("checkout", async (span) => {
        try {
          return await docket.enqueue("email", { to: "a@example.com" }, { queue: "mail" });
        } finally {
          span.end();
        }
      });
      const failing = await docket.enqueue("boom", {}, { queue: "mail", maxAttempts: 1 });
      expect(job.traceContext).toMatch(/traceparent/);
      // The depth gauge reads the stats every 50 ms: wait (up to 10 s, a loaded machine) until an export shows 2 ready jobs.
      const depthSeen = () =>
        metricsOut
          .getMetrics()
          .flatMap((m) => m.scopeMetrics.flatMap((s) => s.metrics))
          .filter((m) => m.descriptor.name === "docket.queue.depth")
          .some((m) => (m.dataPoints as { value: unknown; attributes: Record<string, unknown> }[]).some((p) => p.value === 2 && p.attributes["messaging.destination.name"] === "mail"));
      for (const until = Date.now() + 10_000; Date.now() < until && !depthSeen(); ) {
        await new Promise((r) => setTimeout(r, 50));
        await reader.forceFlush();
      }
      const worker = docket.worker({
        queues: ["mail"],
        pollMs: 20,
        logger: null,
        handlers: otel.handlers({
          email: async () => {
            tracer.startSpan("render template").end();
            return "sent";
          },
          boom: async () => {
            throw new Error("smtp down");
          },
        }),
      });
      await worker.start();
      await docket.waitFor(job.id, { timeoutMs: 20_000, pollMs: 20 });
      await docket.waitFor(failing.id, { timeoutMs: 20_000, pollMs: 20 });
      await worker.stop();
      await reader.forceFlush();
      stopMetrics();

      const finished = spans.getFinishedSpans();
      const byName = (n: string) => finished.filter((s) => s.name === n);
      const checkout = byName("checkout")[0]!;
      const send = byName("send mail").find((s) => s.attributes["messaging.message.id"] === String(job.id))!;
      const process = byName("process mail").find((s) => s.attributes["messaging.message.id"] === String(job.id))!;
      const render = byName("render template")[0]!;
      const failed = byName("process mail").find((s) => s.attributes["messaging.message.id"] === String(failing.id))!;
      expect(send.kind).toBe(SpanKind.PRODUCER);
      expect(send.parentSpanContext?.spanId).toBe(checkout.spanContext().spanId);
      expect(send.attributes).toMatchObject({ "messaging.system": "docket", "messaging.destination.name": "mail", "messaging.operation.type": "send" });
      expect(process.kind).toBe(SpanKind.CONSUMER);
      expect(process.links[0]?.context.spanId).toBe(send.spanContext().spanId);
      expect(process.links[0]?.context.traceId).toBe(checkout.spanContext().traceId);
      expect(process.attributes).toMatchObject({ "messaging.operation.type": "process", "docket.task": "email", "docket.attempt": 1, "docket.wait_ms": expect.any(Number) });
      expect(render.parentSpanContext?.spanId).toBe(process.spanContext().spanId);
      expect(failed.status.code).toBe(2);
      expect(failed.events.some((e) => e.name === "exception")).toBe(true);
      console.log(`${name} trace (in-memory exporter):\n${finished.map(describeSpan).join("\n")}`);

      const exported = metricsOut.getMetrics().flatMap((m) => m.scopeMetrics.flatMap((s) => s.metrics));
      const metric = (n: string) => exported.filter((m) => m.descriptor.name === n).flatMap((m) => m.dataPoints as { value: unknown; attributes: Record<string, unknown> }[]);
      expect(metric("docket.queue.depth").some((p) => p.value === 2 && p.attributes["messaging.destination.name"] === "mail")).toBe(true);
      expect(metric("docket.job.start_latency").length).toBeGreaterThan(0);
      expect(metric("docket.job.run_time").some((p) => p.attributes["docket.outcome"] === "succeeded")).toBe(true);
      expect(metric("docket.job.failures").some((p) => p.value === 1 && p.attributes["docket.outcome"] === "dead")).toBe(true);
      console.log(`${name} metrics: ${[...new Set(exported.map((m) => m.descriptor.name))].join(", ")}`);
      await meterProvider.shutdown();
      await tracerProvider.shutdown();
      await adapter.close();
      await store.close();
    }, 60_000);
    it("a consumer span names the fairness key, the rate key, and the limit that held the job back (docket.delayed_by)", async (ctx) => {
      if (!target) return ctx.skip();
      const { store, adapter, spans, tracerProvider } = await tracedStore(target);
      const otel = openTelemetry({ tracer: tracerProvider.getTracer("docket") });
      const docket = new Docket({ adapter, tracing: otel.tracing });
      // One start per 300 ms for key "api": the second and third jobs wait for it.
      const jobs = [];
      for (let i = 0; i < 3; i++) jobs.push(await docket.enqueue("call", { i }, { queue: "api", fairness: { key: "tenant:7" }, rateLimit: { key: "api", limit: 1, periodMs: 300 } }));
      const worker = docket.worker({ queues: ["api"], pollMs: 20, logger: null, handlers: otel.handlers({ call: async () => "ok" }) });
      await worker.start();
      for (const job of jobs) await docket.waitFor(job.id, { timeoutMs: 20_000, pollMs: 20 });
      await worker.stop();
      const processed = spans.getFinishedSpans().filter((s) => s.kind === SpanKind.CONSUMER);
      const byId = (id: number) => processed.find((s) => s.attributes["messaging.message.id"] === String(id))!;
      expect(byId(jobs[0]!.id).attributes).toMatchObject({ "docket.fairness_key": "tenant:7", "docket.rate_key": "api" });
      expect(byId(jobs[0]!.id).attributes["docket.delayed_by"]).toBeUndefined();
      for (const job of jobs.slice(1)) expect(byId(job.id).attributes).toMatchObject({ "docket.fairness_key": "tenant:7", "docket.delayed_by": "key:api" });
      console.log(`${name} rate-limited trace:\n${processed.map(describeSpan).join("\n")}`);
      await tracerProvider.shutdown();
      await adapter.close();
      await store.close();
    }, 60_000);
  });
}

/** A migrated store of `target`, and a tracer provider whose finished spans `spans` keeps. */
async function tracedStore(target: DisposableTarget) {
  const store = await target.open();
  const adapter = await store.connect();
  await adapter.migrate();
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  return { store, adapter, spans, tracerProvider };
}

function describeSpan(s: ReadableSpan): string {
  const kind = ["INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"][s.kind];
  const link = s.links.length > 0 ? ` links→${s.links.map((l) => l.context.spanId).join(",")}` : "";
  const parent = s.parentSpanContext ? ` parent ${s.parentSpanContext.spanId}` : "";
  return `  ${s.name} [${kind}] trace ${s.spanContext().traceId} span ${s.spanContext().spanId}${parent}${link} ${JSON.stringify(s.attributes)}${s.status.code === 2 ? " ERROR" : ""}`;
}
