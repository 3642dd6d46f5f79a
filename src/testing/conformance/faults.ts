import type { DocketAdapter } from "../../core/adapter.ts";
import { AdapterError } from "../../core/errors.ts";

/** How one adapter method misbehaves: the next `failures` calls throw, before or after the real call. */
export interface Fault {
  failures: number;
  /** "before": nothing is written; "after": the real call commits, then its answer is lost. */
  when: "before" | "after";
}

/** A real adapter whose chosen methods throw on purpose, and a count of every call. */
export interface FaultyAdapter {
  adapter: DocketAdapter;
  calls: Map<string, number>;
  /** Arms (or re-arms) a fault on `method`. */
  inject(method: keyof DocketAdapter, fault: Fault): void;
}

/** Members that are not async operations: passed through as they are. */
const SYNC_MEMBERS = new Set(["onError"]);

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
        calls.set(property, (calls.get(property) ?? 0) + 1);
        const fault = faults.get(property);
        const injected = () => new AdapterError(`${target.name}: injected fault in ${property} (connection lost)`);
        if (fault && fault.failures > 0 && fault.when === "before") {
          fault.failures--;
          throw injected();
        }
        const result = await (value as (...a: unknown[]) => unknown).apply(target, args);
        if (fault && fault.failures > 0 && fault.when === "after") {
          fault.failures--;
          throw injected();
        }
        return result;
      };
    },
  });
  return { adapter, calls, inject: (method, fault) => void faults.set(method, { ...fault }) };
}
