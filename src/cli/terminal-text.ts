/**
 * Characters a terminal may act on instead of showing: the C0 controls
 * (ESC starts escape sequences that retitle the window, move the cursor,
 * rewrite the screen; BEL rings), DEL, the C1 controls U+0080–U+009F (U+009B
 * is a one-character CSI on some terminals), and the bidirectional marks,
 * embeddings, overrides and isolates, which reorder what follows them.
 */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const UNSAFE_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
/** The characters above that JSON.stringify leaves raw (it escapes U+0000–U+001F itself). */
const UNSAFE_IN_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

function escape(c: string): string {
  const code = c.charCodeAt(0);
  return NAMED[c] ?? (code < 0x80 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`);
}

/** `text` on one line with every unsafe character (newlines included) written as an escape: `\x1b`, `\n`, `\u009b`, `\u202e`. */
export function oneLine(text: string): string {
  return text.replace(UNSAFE, escape);
}

/** `text` with every unsafe character but the newline written as an escape: safe to print on a terminal. */
export function printable(text: string): string {
  return text.replace(UNSAFE_BUT_NEWLINE, escape);
}

/**
 * `value` as indented JSON with no character a terminal acts on: what
 * JSON.stringify leaves raw becomes a `\uXXXX` escape, which JSON.parse
 * reads back as the same string (such characters only occur inside strings).
 */
export function jsonText(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(UNSAFE_IN_JSON, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
