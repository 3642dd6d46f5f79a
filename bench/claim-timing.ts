/**
 * A benchmark's look inside its workers' claims (BENCH_DEBUG only): wraps
 * an adapter's `claim` to record each call's time and the jobs it
 * returned, and summarizes them in one line. Not a measurement of record.
 */
import type { DocketAdapter } from "../src/core/adapter.ts";

export interface ClaimTiming {
  /** "N claims, T ms in claims, ms p50 … p99 … max …; size p50 … max …" (empty before any claim). */
  summary(): string;
}

/** Records every claim of `adapter` from now on (the adapter's `claim` is replaced by a timed one). */
export function timeClaims(adapter: DocketAdapter): ClaimTiming {
  const ms: number[] = [];
  const sizes: number[] = [];
  const claim = adapter.claim.bind(adapter);
  (adapter as { claim: typeof claim }).claim = async (params) => {
    const t0 = performance.now();
    const out = await claim(params);
    ms.push(performance.now() - t0);
    sizes.push(out.length);
    return out;
  };
  const q = (xs: number[], p: number) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!.toFixed(1);
  return {
    summary: () =>
      ms.length === 0
        ? ""
        : `${ms.length} claims, ${ms.reduce((a, b) => a + b, 0).toFixed(0)} ms in claims, ms p50 ${q(ms, 0.5)} p99 ${q(ms, 0.99)} max ${q(ms, 1)}; size p50 ${q(sizes, 0.5)} max ${q(sizes, 1)}`,
  };
}
