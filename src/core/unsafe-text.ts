/**
 * Characters a reader may be deceived or driven by instead of seeing them:
 * the C0 controls (on a terminal ESC starts escape sequences that retitle
 * the window, move the cursor, rewrite the screen; BEL rings), DEL, the C1
 * controls U+0080–U+009F (U+009B is a one-character CSI on some terminals),
 * and the bidirectional marks, embeddings, overrides and isolates, which
 * reorder what follows them (`report\u202Efdp.exe` shows as "reportexe.pdf").
 */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const UNSAFE_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

function escape(c: string): string {
  const code = c.charCodeAt(0);
  return NAMED[c] ?? (code < 0x80 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`);
}

/** `text` on one line with every unsafe character (newlines included) written as an escape: `\x1b`, `\n`, `\u009b`, `\u202e`. */
export function oneLine(text: string): string {
  return text.replace(UNSAFE, escape);
}

/** `text` with every unsafe character but the newline written as an escape. */
export function visible(text: string): string {
  return text.replace(UNSAFE_BUT_NEWLINE, escape);
}
