import { InvalidArgumentError, InvalidPayloadError, PayloadTooLargeError } from "./errors.ts";

/** Longest task or queue name; the MySQL index limits it. */
export const MAX_NAME_LENGTH = 191;
export const MIN_PRIORITY = -1_000_000;
export const MAX_PRIORITY = 1_000_000;
export const MAX_ATTEMPTS_LIMIT = 1_000_000;
/** Longest per-attempt timeout: 24 h. */
export const MAX_TIMEOUT_MS = 24 * 3600_000;

export function validateName(value: unknown, what: string): string {
  if (typeof value !== "string" || value.length === 0 || value.length > MAX_NAME_LENGTH) {
    throw new InvalidArgumentError(`${what} must be a non-empty string of at most ${MAX_NAME_LENGTH} characters, got ${describe(value)}`);
  }
  return value;
}

export function validateInteger(value: unknown, what: string, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(`${what} must be an integer in [${min}, ${max}], got ${describe(value)}`);
  }
  return value;
}

export function validateDuration(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new InvalidArgumentError(`${what} must be a finite number of milliseconds >= 0, got ${describe(value)}`);
  }
  return value;
}

/** Epoch ms from a Date or a number; rejects invalid dates, NaN and infinities. */
export function validateTime(value: unknown, what: string): number {
  const ms = value instanceof Date ? value.getTime() : value;
  if (typeof ms !== "number" || !Number.isSafeInteger(Math.trunc(ms)) || !Number.isFinite(ms)) {
    throw new InvalidArgumentError(`${what} must be a valid Date or epoch milliseconds, got ${describe(value)}`);
  }
  return Math.trunc(ms);
}

/**
 * Serializes a payload as JSON, strictly: only null, booleans, finite
 * numbers, strings, arrays and plain objects are accepted, so what a handler
 * reads back equals what was enqueued. Anything JSON.stringify would drop or
 * change silently (undefined, functions, symbols, NaN, Infinity, Dates, Maps,
 * class instances) is rejected with the path to the offending value, as are
 * bigints, cycles and payloads over `maxBytes` (UTF-8).
 */
export function serializePayload(payload: unknown, maxBytes: number): string {
  checkJson(payload, "payload", new Set());
  const text = JSON.stringify(payload);
  const bytes = new TextEncoder().encode(text).length;
  if (bytes > maxBytes) throw new PayloadTooLargeError(bytes, maxBytes);
  return text;
}

function checkJson(value: unknown, path: string, seen: Set<object>): void {
  switch (typeof value) {
    case "string":
    case "boolean":
      return;
    case "number":
      if (!Number.isFinite(value)) throw new InvalidPayloadError(`${path} is ${value}, which JSON cannot represent`);
      return;
    case "object": {
      if (value === null) return;
      if (seen.has(value)) throw new InvalidPayloadError(`${path} is a circular reference`);
      const proto = Object.getPrototypeOf(value);
      if (Array.isArray(value)) {
        seen.add(value);
        value.forEach((item, i) => checkJson(item, `${path}[${i}]`, seen));
        seen.delete(value);
        return;
      }
      if (proto !== Object.prototype && proto !== null) {
        const kind = (value as object).constructor?.name ?? "object";
        throw new InvalidPayloadError(`${path} is a ${kind}; payloads hold plain JSON data only (convert it first, e.g. a Date with toISOString())`);
      }
      seen.add(value);
      for (const [k, v] of Object.entries(value)) checkJson(v, `${path}.${k}`, seen);
      seen.delete(value);
      return;
    }
    default:
      throw new InvalidPayloadError(`${path} is ${typeof value === "undefined" ? "undefined" : `a ${typeof value}`}, which JSON cannot represent`);
  }
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean" || value === null || value === undefined) return String(value);
  return typeof value;
}
