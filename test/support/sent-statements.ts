import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import type { DocketAdapter } from "../../src/core/adapter.ts";
import { tapDialect } from "../../src/testing/kysely/tapped-driver.ts";

/** A statement as the adapter sent it: its text and its parameters' values. */
export interface SentStatement {
  text: string;
  values: readonly unknown[];
}

/** A PostgreSQL adapter whose every statement is recorded in `sent` (cleared by the caller between steps). */
export function recordingPostgresAdapter(connectionString: string, tablePrefix: string): { adapter: DocketAdapter; sent: SentStatement[] } {
  const sent: SentStatement[] = [];
  const adapter = postgresAdapter({
    connectionString,
    tablePrefix,
    instrument: { wrapDialect: (d) => tapDialect(d, { query: (text, values) => void sent.push({ text, values }) }) },
  });
  return { adapter, sent };
}

/** `v` as a PostgreSQL literal (the values docket's statements carry: null, numbers, text). */
export function pgLiteral(v: unknown): string {
  return v === null ? "NULL" : typeof v === "number" ? String(v) : `'${String(v).replace(/'/g, "''")}'`;
}

/** `s`'s text with each `$n` replaced by its value as a literal (to EXPLAIN it as sent, with a custom plan). */
export function inlined(s: SentStatement): string {
  return s.text.replace(/\$(\d+)/g, (_, n: string) => pgLiteral(s.values[Number(n) - 1]));
}
