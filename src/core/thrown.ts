const MAX_ERROR_LENGTH = 8000;

/**
 * A stored reason for anything a handler can throw. Never throws itself:
 * an Error whose `stack` or `message` getter throws, a Proxy whose traps
 * throw, an object whose `toJSON` or `toString` throws all get a reason.
 * The result is at most 8 000 characters, and every NUL character in it is
 * U+2400 (␀): PostgreSQL refuses NUL in text, so the same reason is stored
 * on every adapter (a refused reason would fail the outcome's write).
 */
export function describeThrown(thrown: unknown): string {
  let text: string;
  try {
    text = describe(thrown);
  } catch {
    text = fallback(thrown);
  }
  const cut = text.length > MAX_ERROR_LENGTH ? text.slice(0, MAX_ERROR_LENGTH) : text;
  return cut.includes("\u0000") ? cut.replaceAll("\u0000", "\u2400") : cut;
}

function describe(thrown: unknown): string {
  if (thrown === undefined) return "handler threw undefined";
  if (typeof thrown === "string") return thrown.length > 0 ? thrown : "handler threw an empty string";
  if (thrown instanceof Error) {
    const stack = attempt(() => thrown.stack);
    if (typeof stack === "string" && stack.length > 0) return stack;
    const name = attempt(() => thrown.name);
    const message = attempt(() => thrown.message);
    return `${typeof name === "string" ? name : "Error"}: ${typeof message === "string" ? message : "(unreadable message)"}`;
  }
  const json = attempt(() => JSON.stringify(thrown));
  if (typeof json === "string") return `handler threw ${typeof thrown}: ${json}`;
  const str = attempt(() => String(thrown));
  return typeof str === "string" ? `handler threw ${typeof thrown}: ${str}` : fallback(thrown);
}

function attempt<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}

/** `typeof` never throws, not even on a revoked Proxy. */
function fallback(thrown: unknown): string {
  return `handler threw ${typeof thrown} (not describable: reading it threw)`;
}

/** A one-line message for logs, from any value; never throws. */
export function messageOf(error: unknown): string {
  const message = attempt(() => (error instanceof Error ? error.message : String(error)));
  return typeof message === "string" ? message : describeThrown(error).split("\n")[0]!;
}
