import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { describe, expect, it } from "vitest";

/** Every module reachable from `entry` through static imports, with the bare specifiers each imports. */
function importGraph(entry: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const visit = (file: string) => {
    if (out.has(file)) return;
    const text = readFileSync(file, "utf8");
    const specifiers = [...text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"/gms)].map((m) => m[1]!);
    out.set(file, specifiers.filter((s) => !s.startsWith(".")));
    for (const s of specifiers) if (s.startsWith(".")) visit(resolve(dirname(file), s));
  };
  visit(resolve(entry));
  return out;
}

/** The house rules: what each entry point may load. */
describe("import boundaries", () => {
  it("the main entry (core) imports no SQL, no driver and no OpenTelemetry: tracing costs nothing unless docket/otel is imported", () => {
    const bare = [...importGraph("src/index.ts").values()].flat();
    expect(bare.filter((s) => /^(kysely|pg|mysql2|better-sqlite3|node:sqlite|@opentelemetry\/)/.test(s))).toEqual([]);
  });
  it("no adapter imports OpenTelemetry; only docket/otel does", () => {
    for (const entry of ["src/adapters/postgres/index.ts", "src/adapters/mysql/index.ts", "src/adapters/sqlite/index.ts"]) {
      expect([...importGraph(entry).values()].flat().filter((s) => s.startsWith("@opentelemetry/")), entry).toEqual([]);
    }
    expect([...importGraph("src/otel/index.ts").values()].flat()).toContain("@opentelemetry/api");
  });
});
