import { TraceFlags, isSpanContextValid, type SpanContext } from "@opentelemetry/api";

/**
 * The W3C Trace Context headers (`traceparent`, and `tracestate` when the
 * span has one) of `span`, version 00; or an empty carrier when the span
 * context is not valid (no span is active). What docket stores with a job
 * when no global propagator wrote anything (the API's default writes
 * nothing), so a consumer span still links to its producer.
 */
export function traceparentOf(span: SpanContext | undefined): Record<string, string> {
  if (span === undefined || !isSpanContextValid(span)) return {};
  const flags = (span.traceFlags & 0xff).toString(16).padStart(2, "0");
  const carrier: Record<string, string> = { traceparent: `00-${span.traceId}-${span.spanId}-${flags}` };
  const state = span.traceState?.serialize();
  if (state) carrier.tracestate = state;
  return carrier;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * The remote span context a `traceparent` header names, or null when there
 * is none or it is malformed (version ff, all-zero ids, a version 00 header
 * with extra fields: the Trace Context rules). `tracestate` is not parsed.
 */
export function spanContextOfTraceparent(carrier: Record<string, string>): SpanContext | null {
  const m = TRACEPARENT.exec((carrier.traceparent ?? "").trim());
  if (!m) return null;
  const [, version, traceId, spanId, flags, rest] = m;
  if (version === "ff" || (version === "00" && rest !== undefined)) return null;
  const span: SpanContext = { traceId: traceId!, spanId: spanId!, traceFlags: parseInt(flags!, 16) & TraceFlags.SAMPLED, isRemote: true };
  return isSpanContextValid(span) ? span : null;
}
