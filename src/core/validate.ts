import { InvalidArgumentError, InvalidPayloadError, PayloadTooLargeError } from "./errors.ts";
import { kindOf, shown } from "./shown.ts";

/** Longest task or queue name; the MySQL index limits it. */
export const MAX_NAME_LENGTH = 191;
/** Longest text searched for in stored text (e.g. `list({ errorContains })`). */
export const MAX_SEARCH_LENGTH = 200;
export const MIN_PRIORITY = -1_000_000;
export const MAX_PRIORITY = 1_000_000;
export const MAX_ATTEMPTS_LIMIT = 1_000_000;
/** Longest per-attempt timeout: 24 h. */
export const MAX_TIMEOUT_MS = 24 * 3600_000;

/** Latest accepted run time: 9999-12-31T23:59:59.999Z, within every adapter's bigint and JS Date. */
export const MAX_TIME_MS = 253_402_300_799_999;
/** Longest accepted delay (and backoff): 100 years. */
export const MAX_DELAY_MS = 100 * 365 * 24 * 3600_000;
/**
 * Deepest accepted payload nesting, in arrays and objects: MariaDB's
 * JSON_VALID rejects 32 levels, so no adapter may store more than 31.
 */
export const MAX_PAYLOAD_DEPTH = 31;

/** Why `text` cannot be stored as it is on every adapter, or null. */
function unstorable(text: string): string | null {
  if (text.includes("\u0000")) return "contains a NUL character (\\u0000), which PostgreSQL cannot store";
  if (!isWellFormed(text)) return "contains a lone surrogate (invalid UTF-16), which cannot be stored as UTF-8";
  return null;
}

function isWellFormed(text: string): boolean {
  const native = (text as { isWellFormed?: () => boolean }).isWellFormed;
  if (typeof native === "function") return native.call(text);
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text);
}

/**
 * A task, queue or key name: 1 to 191 UTF-16 units, well-formed, no NUL, not
 * ending in a space. It must round-trip and match only itself on every
 * adapter: MariaDB compares VARCHARs ignoring trailing spaces (PAD SPACE, even
 * under utf8mb4_bin), so there "a " would match "a".
 */
export function validateName(value: unknown, what: string): string {
  if (typeof value !== "string" || value.length === 0 || value.length > MAX_NAME_LENGTH) {
    throw new InvalidArgumentError(`${what} must be a non-empty string of at most ${MAX_NAME_LENGTH} characters, got ${shown(value)}`);
  }
  const why = unstorable(value);
  if (why !== null) throw new InvalidArgumentError(`${what} ${why}`);
  if (value.endsWith(" ")) {
    throw new InvalidArgumentError(`${what} ends with a space, got ${shown(value)}: MariaDB ignores trailing spaces when comparing, so it would match the name without them`);
  }
  return value;
}

/** Text to search for: 1 to MAX_SEARCH_LENGTH UTF-16 units, well-formed, no NUL (so every adapter can send it). */
export function validateSearchText(value: unknown, what: string): string {
  if (typeof value !== "string" || value.length === 0 || value.length > MAX_SEARCH_LENGTH) {
    throw new InvalidArgumentError(`${what} must be a non-empty string of at most ${MAX_SEARCH_LENGTH} characters, got ${shown(value)}`);
  }
  const why = unstorable(value);
  if (why !== null) throw new InvalidArgumentError(`${what} ${why}`);
  return value;
}

export function validateInteger(value: unknown, what: string, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(`${what} must be an integer in [${min}, ${max}], got ${shown(value)}`);
  }
  return value;
}

/** A delay in ms: a finite number in [0, 100 years], rounded to whole milliseconds. */
export function validateDuration(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0 || value > MAX_DELAY_MS) {
    throw new InvalidArgumentError(`${what} must be a number of milliseconds in [0, ${MAX_DELAY_MS}] (100 years), got ${shown(value)}`);
  }
  return Math.round(value);
}

/**
 * Epoch ms from a Date or a number, rounded to whole milliseconds, between
 * 1970-01-01 and 9999-12-31 (the same range on every adapter); rejects
 * invalid dates, NaN and infinities.
 */
export function validateTime(value: unknown, what: string): number {
  const ms = value instanceof Date ? value.getTime() : value;
  if (typeof ms !== "number" || !Number.isFinite(ms) || Math.round(ms) < 0 || Math.round(ms) > MAX_TIME_MS) {
    throw new InvalidArgumentError(`${what} must be a valid Date or epoch milliseconds between 1970-01-01 and 9999-12-31, got ${shown(value)}`);
  }
  return Math.round(ms);
}

/**
 * Rejects `value` as `what` unless it is an object and not an array:
 * null, arrays, strings and other primitives are InvalidArgumentError
 * saying what was passed ("must be an object, got a string ("fast")").
 * `value` undefined passes: it means "absent" (no options).
 */
export function checkObject(value: unknown, what: string, shape = ""): void {
  if (value === undefined) return;
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new InvalidArgumentError(`${what} must be an object${shape}, got ${got(value)}`);
  }
}

/**
 * Rejects keys of `value` (an options object) that are not in `known`, naming
 * the key and the closest known one, so a misspelt option is never ignored.
 * `value` undefined passes; anything else but an object is rejected (see checkObject).
 */
export function checkKeys(value: unknown, known: readonly string[], what: string): void {
  checkObject(value, what);
  if (value === undefined) return;
  for (const key of Object.keys(value as object)) {
    if (known.includes(key)) continue;
    const near = closest(key, known);
    throw new InvalidArgumentError(`unknown option ${shown(key)} in ${what}${near ? ` (did you mean ${JSON.stringify(near)}?)` : ""}; known: ${known.join(", ")}`);
  }
}

/** What a message says was passed: its kind, and a primitive's (cut) value. */
function got(value: unknown): string {
  const primitive = typeof value === "string" || typeof value === "number" || typeof value === "boolean" || typeof value === "bigint";
  return primitive ? `${kindOf(value)} (${shown(value)})` : kindOf(value);
}

/**
 * A known word `word` abbreviates or extends, else the nearest by edit
 * distance if near enough to be a misspelling, else one it abbreviates by
 * dropping letters ("opts": "options").
 */
function closest(word: string, known: readonly string[]): string | null {
  const lower = word.toLowerCase();
  const prefixed = known.find((k) => lower.length >= 3 && (k.toLowerCase().startsWith(lower) || lower.startsWith(k.toLowerCase())));
  if (prefixed) return prefixed;
  const limit = Math.max(2, Math.floor(word.length / 3));
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const k of known) {
    // The distance is at least the difference in length: no need to compute it (for a long word, a long time).
    if (Math.abs(word.length - k.length) > limit) continue;
    const d = editDistance(lower, k.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  if (bestDistance <= limit) return best;
  return known.find((k) => lower.length >= 3 && lower.length < k.length && lower[0] === k[0]?.toLowerCase() && isSubsequence(lower, k.toLowerCase())) ?? null;
}

/** Whether `short` is `long` with some letters left out. */
function isSubsequence(short: string, long: string): boolean {
  let i = 0;
  for (const c of long) if (c === short[i]) i++;
  return i === short.length;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}

/**
 * Serializes a payload as JSON, strictly, by one rule for every adapter: only
 * null, booleans, finite numbers, strings, arrays and plain objects are
 * accepted, nested at most 31 deep; strings and keys must be well-formed
 * UTF-16 without NUL. What a handler reads back then equals what was
 * enqueued on every adapter (except -0, which JSON writes as 0). Anything
 * else (undefined, functions, symbols, NaN, Infinity, Dates, Maps, class
 * instances, bigints, cycles) is an InvalidPayloadError naming the path
 * (from `what`: "payload", or "result", "progress", a step's result), as
 * is a payload over `maxBytes` (UTF-8) a PayloadTooLargeError. Iterative:
 * no input can overflow the stack. The text is written from a copy made
 * while checking, so what is stored is exactly what was checked: each value
 * is read once (a getter is not asked again), `toJSON` is never called, and
 * only array elements and own enumerable string keys are kept.
 */
export function serializePayload(payload: unknown, maxBytes: number, what = "payload"): string {
  const text = JSON.stringify(checkedCopy(payload, what));
  const bytes = utf8Bytes(text);
  if (bytes > maxBytes) throw new PayloadTooLargeError(bytes, maxBytes);
  return text;
}

/** The length of `text` in UTF-8 bytes. */
export function utf8Bytes(text: string): number {
  return new TextEncoder().encode(text).length;
}

type Slot = { value: unknown; path: string; depth: number; into: Record<string, unknown> | unknown[]; key: string | number };

/** A copy of `root` in plain arrays and null-prototype objects, or an InvalidPayloadError naming the path of the first offence. */
function checkedCopy(root: unknown, what: string): unknown {
  // Depth-first with an explicit stack; `open` holds the containers on the current path (cycle check).
  const top: unknown[] = [];
  const stack: (Slot | { exit: object })[] = [{ value: root, path: what, depth: 0, into: top, key: 0 }];
  const open = new Set<object>();
  while (stack.length > 0) {
    const slot = stack.pop()!;
    if ("exit" in slot) {
      open.delete(slot.exit);
      continue;
    }
    const { value, path, depth, into, key } = slot;
    const put = (v: unknown): void => {
      (into as Record<string | number, unknown>)[key] = v;
    };
    switch (typeof value) {
      case "boolean":
        put(value);
        continue;
      case "string": {
        const why = unstorable(value);
        if (why !== null) throw new InvalidPayloadError(`${path} ${why}`);
        put(value);
        continue;
      }
      case "number":
        if (!Number.isFinite(value)) throw new InvalidPayloadError(`${path} is ${value}, which JSON cannot represent`);
        put(value);
        continue;
      case "object": {
        if (value === null) {
          put(null);
          continue;
        }
        if (open.has(value)) throw new InvalidPayloadError(`${path} is a circular reference`);
        if (depth + 1 > MAX_PAYLOAD_DEPTH) {
          throw new InvalidPayloadError(`${path} nests deeper than ${MAX_PAYLOAD_DEPTH} levels of arrays and objects, the most every adapter stores`);
        }
        const isArray = Array.isArray(value);
        if (!isArray) {
          const proto = Object.getPrototypeOf(value);
          if (proto !== Object.prototype && proto !== null) {
            const kind = (value as object).constructor?.name ?? "object";
            throw new InvalidPayloadError(`${path} is a ${kind}; payloads hold plain JSON data only (convert it first, e.g. a Date with toISOString())`);
          }
        }
        open.add(value);
        stack.push({ exit: value });
        const entries: [string, unknown][] = isArray ? Array.from(value as unknown[], (v, i) => [String(i), v]) : Object.entries(value);
        const copy: Record<string, unknown> | unknown[] = isArray ? new Array<unknown>(entries.length) : (Object.create(null) as Record<string, unknown>);
        put(copy);
        for (let i = entries.length - 1; i >= 0; i--) {
          const [k, v] = entries[i]!;
          if (!isArray) {
            const why = unstorable(k);
            if (why !== null) throw new InvalidPayloadError(`${path} has a key that ${why}`);
          }
          stack.push({ value: v, path: isArray ? `${path}[${k}]` : `${path}.${k}`, depth: depth + 1, into: copy, key: isArray ? i : k });
        }
        continue;
      }
      default:
        throw new InvalidPayloadError(`${path} is ${typeof value === "undefined" ? "undefined" : `a ${typeof value}`}, which JSON cannot represent`);
    }
  }
  return top[0];
}
