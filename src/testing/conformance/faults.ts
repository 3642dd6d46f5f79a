import type { DocketAdapter, SettleItem } from "../../core/adapter.ts";
import { AdapterError } from "../../core/errors.ts";

/** How one adapter method misbehaves: the next `failures` calls throw, before or after the real call. */
export interface Fault {
  failures: number;
  /** "before": nothing is written; "after": the real call commits, then its answer is lost. */
  when: "before" | "after";
}

/**
 * Where a fault is injected: an adapter method, one kind of `settle` item
 * (`complete`, `fail`, `release`: a `settle` call with such an item), or
 * `heartbeat` (an `extendLeases` call).
 */
export type FaultPoint = keyof DocketAdapter | SettleItem["kind"] | "heartbeat";

/** A real adapter whose chosen methods throw on purpose, and a count of every call. */
export interface FaultyAdapter {
  adapter: DocketAdapter;
  calls: Map<string, number>;
  /** Arms (or re-arms) a fault on `method`. */
  inject(method: FaultPoint, fault: Fault): void;
}

/** Members that are not async operations: passed through as they are. */
const SYNC_MEMBERS = new Set(["onError", "onReady"]);

/**
 * Fault injection over a REAL adapter (every call that is not failed goes to
 * the database): stands in for a dropped connection at a chosen statement.
 */
export function withFaults(real: DocketAdapter): FaultyAdapter {
  const faults = new Map<string, Fault>();
  const calls = new Map<string, number>();
  const adapter = new Proxy(real, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== "function" || typeof property !== "string") return value;
      if (SYNC_MEMBERS.has(property)) return (value as (...a: unknown[]) => unknown).bind(target);
      return async (...args: unknown[]) => {
        // A `settle` (or `settleAndHandOff`) call is a call of each kind its items have (complete, fail, release), and `extendLeases` one of `heartbeat`.
        const names = property === "settle" || property === "settleAndHandOff" ? settledMethods(args[0]) : property === "extendLeases" ? ["heartbeat"] : [property];
        for (const name of names) calls.set(name, (calls.get(name) ?? 0) + 1);
        const armed = (when: Fault["when"]) => {
          const name = names.find((n) => (faults.get(n)?.failures ?? 0) > 0 && faults.get(n)!.when === when);
          if (name === undefined) return;
          faults.get(name)!.failures--;
          throw new AdapterError(`${target.name}: injected fault in ${name} (connection lost)`);
        };
        armed("before");
        const result = await (value as (...a: unknown[]) => unknown).apply(target, args);
        armed("after");
        return result;
      };
    },
  });
  return { adapter, calls, inject: (method, fault) => void faults.set(method, { ...fault }) };
}

/** The methods a `settle` call's items stand for, each once, in first-seen order. */
function settledMethods(params: unknown): string[] {
  const items = (params as { items?: { kind: string }[] } | undefined)?.items ?? [];
  return [...new Set(items.map((i) => i.kind))];
}
