/**
 * Sizes of statements whose driver sends parameters inlined as escaped
 * literals (see Engine.maxStatementBytes): a string takes at most twice its
 * UTF-8 bytes (every byte escaped) plus its quotes.
 */

/** Bytes kept, in a one-row statement, for its SQL text and every column but its one large JSON value (names, numbers, a trace context). */
export const ROW_ALLOWANCE = 64 * 1024;

/** Bytes kept, in a multi-row INSERT, for its SQL text (table, column list). */
const STATEMENT_TEXT = 8 * 1024;

/** The largest JSON text (UTF-8 bytes) that one row of a statement of at most `maxStatementBytes` bytes carries. */
export function payloadLimitWithin(maxStatementBytes: number): number {
  return Math.max(0, Math.floor((maxStatementBytes - ROW_ALLOWANCE) / 2));
}

/** The length of `text` in UTF-8 bytes. */
function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    // 0x80-0x7FF take 2 bytes, the rest of the BMP 3, a surrogate pair (2 units) 4.
    if (unit >= 0x80) bytes += unit < 0x800 || (unit >= 0xd800 && unit <= 0xdfff) ? 1 : 2;
  }
  return bytes;
}

/** At most how many bytes `value` takes inlined in a statement, with its separator. */
function inlinedBytes(value: unknown): number {
  if (typeof value === "string") return 2 * utf8Length(value) + 4;
  return String(value).length + 2;
}

/**
 * `rows` in order, in runs of at most `maxRows` rows whose inlined values,
 * with the statement's own text, fit in `maxStatementBytes` (null: no byte
 * limit). A row too large for any run is a run of its own.
 */
export function chunkRows<R extends Record<string, unknown>>(rows: readonly R[], maxRows: number, maxStatementBytes: number | null): R[][] {
  const runs: R[][] = [];
  let run: R[] = [];
  let size = STATEMENT_TEXT;
  for (const row of rows) {
    let bytes = 4;
    if (maxStatementBytes !== null) for (const value of Object.values(row)) bytes += inlinedBytes(value);
    if (run.length > 0 && (run.length >= maxRows || (maxStatementBytes !== null && size + bytes > maxStatementBytes))) {
      runs.push(run);
      run = [];
      size = STATEMENT_TEXT;
    }
    run.push(row);
    size += bytes;
  }
  if (run.length > 0) runs.push(run);
  return runs;
}
