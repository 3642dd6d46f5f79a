import { readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../..");

/** Every module specifier a source file names: static imports and re-exports (type-only too), and dynamic imports. */
function specifiers(source: string): string[] {
  const found: string[] = [];
  for (const m of source.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["']/gms)) found.push(m[1]!);
  for (const m of source.matchAll(/^\s*import\s*["']([^"']+)["']/gm)) found.push(m[1]!);
  for (const m of source.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)) found.push(m[1]!);
  return found;
}

/** The files `entry` reaches through relative imports, and the packages they name, by the file that names each. */
function moduleGraph(entry: string): { files: string[]; packages: Map<string, string[]> } {
  const files = new Set<string>();
  const packages = new Map<string, string[]>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    for (const spec of specifiers(readFileSync(file, "utf8"))) {
      if (spec.startsWith(".")) visit(resolve(dirname(file), spec));
      else packages.set(spec, [...(packages.get(spec) ?? []), relative(ROOT, file)]);
    }
  };
  visit(join(ROOT, entry));
  return { files: [...files].map((f) => relative(ROOT, f)).sort(), packages };
}

describe("docket/testing is portable", () => {
  it("its module graph imports no kysely and no file of the SQL store or of the kit's SQL entry", () => {
    const { files, packages } = moduleGraph("src/testing/index.ts");
    expect(files).toContain("src/testing/conformance/index.ts");
    const kysely = [...packages].filter(([name]) => name === "kysely" || name.startsWith("kysely/"));
    expect(kysely, "packages named kysely, with the files that import them").toEqual([]);
    expect(files.filter((f) => f.startsWith("src/adapters/") || f.startsWith("src/testing/kysely/"))).toEqual([]);
  });

  it("the kit's SQL entry does import kysely (the scan sees it)", () => {
    const { packages } = moduleGraph("src/testing/kysely/index.ts");
    expect(packages.has("kysely")).toBe(true);
  });
});
