/** Text for a terminal: what stored data cannot use to drive it (core/unsafe-text.ts). */
import { oneLine, visible } from "../core/unsafe-text.ts";

/** `oneLine`: every unsafe character escaped, newlines too; `printable`: the newline kept. */
export { oneLine, visible as printable };

/** The unsafe characters (core/unsafe-text.ts) that JSON.stringify leaves raw (it escapes U+0000–U+001F itself). */
const UNSAFE_IN_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * `value` as indented JSON with no character a terminal acts on: what
 * JSON.stringify leaves raw becomes a `\uXXXX` escape, which JSON.parse
 * reads back as the same string (such characters only occur inside strings).
 */
export function jsonText(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(UNSAFE_IN_JSON, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
