/** The most characters of a value's text an error message quotes. */
export const SHOWN_CHARS = 100;

/**
 * `value` as an error message quotes it: a string as JSON, cut after
 * SHOWN_CHARS characters of that text with "…(N chars)" (N: the string's
 * length); a number, boolean, bigint, null or undefined as its text, cut the
 * same way; anything else by its kind ("an array", "an object"), never its
 * contents. So a message stays short whatever the caller passed.
 */
export function shown(value: unknown): string {
  if (typeof value === "string") {
    const head = value.length > SHOWN_CHARS ? value.slice(0, SHOWN_CHARS) : value;
    return clipped(JSON.stringify(head), value.length, value.length > SHOWN_CHARS);
  }
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint" || value === null || value === undefined) {
    const text = String(value);
    return clipped(text, text.length, false);
  }
  return kindOf(value);
}

/** What `value` is, with an article: "a string", "an array", "null", "a Date". */
export function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (value === undefined) return "undefined";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") {
    const proto = Object.getPrototypeOf(value);
    const name = proto === null || proto === Object.prototype ? "object" : (value as object).constructor?.name;
    return typeof name === "string" && name !== "" ? withArticle(name) : "an object";
  }
  return withArticle(typeof value);
}

/**
 * `text` cut to SHOWN_CHARS characters (never inside a surrogate pair) and
 * marked with the length of what it came from, when it is longer or `cut`.
 */
export function clipped(text: string, length = text.length, cut = false): string {
  if (text.length <= SHOWN_CHARS && !cut) return text;
  let end = Math.min(text.length, SHOWN_CHARS);
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}…(${length} chars)`;
}

function withArticle(noun: string): string {
  return `${/^[aeiou]/i.test(noun) ? "an" : "a"} ${noun}`;
}
