/**
 * OpenTelemetry for docket, in its own entry point ("docket/otel"): only
 * an application that imports it loads `@opentelemetry/api` (an optional
 * peer dependency); docket's core never does.
 *
 *   const otel = openTelemetry();
 *   const docket = new Docket({ adapter, tracing: otel.tracing });
 *   const stop = otel.observe(docket);                  // metrics
 *   docket.worker({ handlers: otel.handlers({ … }) });  // a consumer span per attempt
 *
 * Spans follow the messaging semantic conventions: `send <queue>` (kind
 * PRODUCER) around an enqueue, its context stored with the jobs; `process
 * <queue>` (kind CONSUMER) around each attempt's handler, linked to the
 * producer span, and active while the handler runs (its own spans nest).
 *
 * The context is stored by the global propagator (`propagation`); when it
 * writes nothing (none was set: the API's default is a no-op), docket writes
 * the W3C `traceparent` itself, and reads it back the same way, so the link
 * holds either way (trace-context.ts).
 *
 * @module docket/otel
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  context,
  metrics,
  propagation,
  trace,
  type Attributes,
  type Link,
  type Meter,
  type Tracer,
} from "@opentelemetry/api";
import type { Docket, EnqueueTracing, TaskMap } from "../client/docket.ts";
import { InvalidArgumentError } from "../core/errors.ts";
import type { JobRecord } from "../core/job.ts";
import { shown } from "../core/shown.ts";
import { checkKeys, checkObject, validateInteger } from "../core/validate.ts";
import { JobLeaseLostError, JobTimeoutError, WorkerStoppingError, type Handler, type JobContext } from "../worker/index.ts";
import { spanContextOfTraceparent, traceparentOf } from "./trace-context.ts";

export interface OpenTelemetryOptions {
  /** Default: the global tracer provider's "docket" tracer. */
  tracer?: Tracer;
  /** Default: the global meter provider's "docket" meter. */
  meter?: Meter;
  /** How often `observe` reads queue depth (docket.stats()). Default 15 000 ms. */
  depthIntervalMs?: number;
}

export interface DocketTelemetry {
  /** Pass as `new Docket({ tracing })`: a producer span per enqueue call, its context stored with the jobs. */
  readonly tracing: EnqueueTracing;
  /** Wraps handlers so that each attempt runs in a consumer span linked to its enqueue's span. */
  handlers<H extends Record<string, Handler<never> | undefined>>(handlers: H): H;
  /**
   * Records metrics from `docket`'s events and stats until the returned
   * function is called: `docket.queue.depth` (ready jobs per queue, a gauge),
   * `docket.job.start_latency` and `docket.job.run_time` (histograms, ms),
   * `docket.job.failures` (a counter, by outcome retried/dead).
   */
  observe<T extends TaskMap>(docket: Docket<T>): () => void;
}

const SYSTEM = "docket";

function attributesOf(queue: string, extra: Attributes = {}): Attributes {
  return { "messaging.system": SYSTEM, "messaging.destination.name": queue, ...extra };
}

/** `value` when it is an object with every method of `methods`; else InvalidArgumentError naming `what`. */
function withMethods<T>(value: unknown, what: string, methods: readonly string[]): T {
  const missing = value === null || typeof value !== "object" ? methods : methods.filter((m) => typeof (value as Record<string, unknown>)[m] !== "function");
  if (missing.length > 0) throw new InvalidArgumentError(`${what} must be an OpenTelemetry ${what === "tracer" ? "Tracer" : "Meter"} (with ${methods.join(", ")}), got ${shown(value)}`);
  return value as T;
}

/** Bad options are InvalidArgumentError, before anything is started. */
export function openTelemetry(options: OpenTelemetryOptions = {}): DocketTelemetry {
  checkObject(options, "openTelemetry(options)");
  checkKeys(options, ["tracer", "meter", "depthIntervalMs"], "openTelemetry(options)");
  const tracer = options.tracer === undefined ? trace.getTracer(SYSTEM) : withMethods<Tracer>(options.tracer, "tracer", ["startActiveSpan", "startSpan"]);
  const meter = options.meter === undefined ? metrics.getMeter(SYSTEM) : withMethods<Meter>(options.meter, "meter", ["createHistogram", "createCounter", "createObservableGauge"]);
  // Each read is one stats() call (about a dozen queries), and a read still under way skips the next.
  const depthIntervalMs = validateInteger(options.depthIntervalMs ?? 15_000, "depthIntervalMs", 10, 86_400_000);

  const tracing: EnqueueTracing = {
    enqueue(jobs, store) {
      const queues = [...new Set(jobs.map((j) => j.queue))];
      const queue = queues.length === 1 ? queues[0]! : "(many)";
      const attributes = attributesOf(queue, { "messaging.operation.type": "send", "messaging.operation.name": "send", "messaging.batch.message_count": jobs.length });
      return tracer.startActiveSpan(`send ${queue}`, { kind: SpanKind.PRODUCER, attributes }, async (span) => {
        try {
          let carrier: Record<string, string> = {};
          propagation.inject(context.active(), carrier);
          // No global propagator wrote anything: the W3C header, so the consumer span still links to this one.
          if (Object.keys(carrier).length === 0) carrier = traceparentOf(span.spanContext());
          const result = await store(Object.keys(carrier).length === 0 ? null : JSON.stringify(carrier));
          if (Array.isArray(result) && result.length === 1) span.setAttribute("messaging.message.id", String((result[0] as JobRecord).id));
          return result;
        } catch (error) {
          span.recordException(error as Error);
          span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
          throw error;
        } finally {
          span.end();
        }
      });
    },
  };

  function traced<P>(handler: Handler<P>): Handler<P> {
    return (payload: P, ctx: JobContext<P>) => {
      const job = ctx.job;
      const links: Link[] = [];
      if (job.traceContext !== null) {
        const carrier = JSON.parse(job.traceContext) as Record<string, string>;
        const producer = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, carrier)) ?? spanContextOfTraceparent(carrier);
        if (producer) links.push({ context: producer });
      }
      const attributes = attributesOf(job.queue, {
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.message.id": String(job.id),
        "docket.task": job.task,
        "docket.attempt": job.attempt,
        // How long it waited once due (a rate limit, a cap, a key or busy workers held it), and the flow controls it is under.
        "docket.wait_ms": Math.max(0, job.updatedAt - job.runAt),
        ...(job.fairKey === null ? {} : { "docket.fairness_key": job.fairKey }),
        ...(job.rateKey === null ? {} : { "docket.rate_key": job.rateKey }),
        // The rate limit that held it back after it fell due, as "queue:<name>", "task:<name>" or "key:<name>".
        ...(job.delayedBy === null ? {} : { "docket.delayed_by": `${job.delayedBy.scope}:${job.delayedBy.name}` }),
      });
      // A root span (linked to its producer): not a child of whatever context the worker was started in.
      return tracer.startActiveSpan(`process ${job.queue}`, { kind: SpanKind.CONSUMER, attributes, links }, ROOT_CONTEXT, async (span) => {
        let ended = false;
        const end = () => void (ended || ((ended = true), span.end()));
        // The attempt's end when its signal says so, not when a handler that ignores the signal returns.
        const aborted = () => {
          const reason: unknown = ctx.signal.reason;
          if (reason instanceof JobTimeoutError) {
            span.setAttribute("docket.outcome", "timed_out");
            span.setStatus({ code: SpanStatusCode.ERROR, message: reason.message });
            end();
          } else if (reason instanceof JobLeaseLostError) {
            span.setAttribute("docket.outcome", reason.cancelled ? "cancelled" : "lost");
            span.setStatus({ code: SpanStatusCode.ERROR, message: reason.message });
            end();
          } else if (reason instanceof WorkerStoppingError) span.setAttribute("docket.worker_stopping", true);
        };
        if (ctx.signal.aborted) aborted();
        else ctx.signal.addEventListener("abort", aborted, { once: true });
        try {
          return await handler(payload, ctx);
        } catch (error) {
          if (!ended) {
            span.recordException(error instanceof Error ? error : String(error));
            span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
          }
          throw error;
        } finally {
          ctx.signal.removeEventListener("abort", aborted);
          end();
        }
      });
    };
  }

  return {
    tracing,
    handlers<H extends Record<string, Handler<never> | undefined>>(handlers: H): H {
      const out: Record<string, Handler<never> | undefined> = {};
      checkObject(handlers, "handlers");
      for (const [task, handler] of Object.entries(handlers)) {
        // As the worker's own check: a bad handler is refused here, not wrapped into one that fails every job.
        if (handler !== undefined && typeof handler !== "function") throw new InvalidArgumentError(`handler for ${shown(task)} must be a function`);
        out[task] = handler === undefined ? undefined : (traced(handler as Handler<unknown>) as Handler<never>);
      }
      return out as H;
    },
    observe<T extends TaskMap>(docket: Docket<T>): () => void {
      const startLatency = meter.createHistogram("docket.job.start_latency", { unit: "ms", description: "From when a job was due to when an attempt started" });
      const runTime = meter.createHistogram("docket.job.run_time", { unit: "ms", description: "How long an attempt ran, from start to its recorded outcome" });
      const failures = meter.createCounter("docket.job.failures", { description: "Failed attempts, by outcome (retried, dead)" });
      const depth = meter.createObservableGauge("docket.queue.depth", { description: "Ready jobs per queue" });
      const started = new Map<string, number>();
      const attemptKey = (job: { id: number; attempt: number }) => `${job.id}:${job.attempt}`;
      const ran = (job: { id: number; attempt: number; queue: string; task: string }, at: number, outcome: string) => {
        const from = started.get(attemptKey(job));
        started.delete(attemptKey(job));
        if (from !== undefined) runTime.record(at - from, attributesOf(job.queue, { "docket.task": job.task, "docket.outcome": outcome }));
      };
      let latest: { queue: string; ready: number }[] = [];
      let reading = false;
      const readDepth = () => {
        if (reading) return;
        reading = true;
        void docket
          .stats({ runningLimit: 1, keysLimit: 1 })
          .then(
            (s) => void (latest = s.queues.map((q) => ({ queue: q.queue, ready: q.counts.ready }))),
            () => undefined,
          )
          .finally(() => (reading = false));
      };
      const callback = (result: { observe(value: number, attributes?: Attributes): void }) => {
        for (const q of latest) result.observe(q.ready, attributesOf(q.queue));
      };
      depth.addCallback(callback);
      readDepth();
      const timer = setInterval(readDepth, depthIntervalMs);
      (timer as { unref?: () => void }).unref?.();
      const offs = [
        docket.on("started", (e) => {
          started.set(attemptKey(e.job), e.at);
          startLatency.record(Math.max(0, e.at - e.job.runAt), attributesOf(e.job.queue, { "docket.task": e.job.task }));
        }),
        docket.on("succeeded", (e) => ran(e.job, e.at, "succeeded")),
        docket.on("released", (e) => ran(e.job, e.at, "released")),
        docket.on("lost", (e) => ran(e.job, e.at, "lost")),
        docket.on("retried", (e) => {
          ran({ ...e.job, attempt: e.job.attempt }, e.at, "retried");
          failures.add(1, attributesOf(e.job.queue, { "docket.task": e.job.task, "docket.outcome": "retried" }));
        }),
        docket.on("dead", (e) => {
          ran(e.job, e.at, "dead");
          failures.add(1, attributesOf(e.job.queue, { "docket.task": e.job.task, "docket.outcome": "dead" }));
        }),
        // A sweep found the attempt's lease expired: a failed attempt too, retried or dead.
        docket.on("reclaimed", (e) => {
          const outcome = e.job.state === "dead" ? "dead" : "retried";
          ran(e.job, e.at, outcome);
          failures.add(1, attributesOf(e.job.queue, { "docket.task": e.job.task, "docket.outcome": outcome, "docket.reclaimed": true }));
        }),
      ];
      return () => {
        clearInterval(timer);
        depth.removeCallback(callback);
        for (const off of offs) off();
      };
    },
  };
}
