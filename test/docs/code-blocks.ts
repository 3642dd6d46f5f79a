/**
 * The documentation's TypeScript blocks as a project tsc can check: each
 * ```ts / ```typescript block of README.md and docs/*.md becomes one module
 * (its lines kept, `export {}` appended), with docket's package names
 * ("docket", "docket/sqlite", …, and Deno's "@docket/docket…") rewritten to
 * the sources they name, and fragment-globals.d.ts declaring what fragments
 * use without defining it. The project lives in test-artifacts/ (ignored by
 * git), so that imports of the repository's dependencies resolve.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { ROOT, codeBlocks, docFiles, readDoc } from "./markdown.ts";

export const PROJECT = join(ROOT, "test-artifacts/docs-code-blocks");

/** The fence languages of TypeScript blocks. */
export const TS_LANGS = new Set(["ts", "typescript"]);

/** Where one generated module came from. */
export interface BlockSource {
  file: string;
  /** The line of the block's first code line in `file`. */
  line: number;
}

/** The package's entry points, by the name an application imports, as repository paths of their sources. */
export function entryPoints(): Map<string, string> {
  const entries = new Map<string, string>();
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { exports: Record<string, { default: string }> };
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    const source = target.default.replace(/^\.\/dist\//, "src/").replace(/\.js$/, ".ts");
    entries.set(subpath === "." ? "docket" : `docket/${subpath.slice(2)}`, source);
  }
  const deno = JSON.parse(readFileSync(join(ROOT, "deno.json"), "utf8")) as { name: string; exports: Record<string, string> };
  for (const [subpath, source] of Object.entries(deno.exports)) {
    entries.set(subpath === "." ? deno.name : `${deno.name}/${subpath.slice(2)}`, source.replace(/^\.\//, ""));
  }
  return entries;
}

const SPECIFIER = /(\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)(["'])([^"']+)\2/g;

/** `code` with each import of one of docket's package names rewritten to `to(source)`, `source` the repository path of the entry point's source. */
export function rewriteImports(code: string, entries: Map<string, string>, to: (source: string) => string): string {
  return code.replace(SPECIFIER, (whole, keyword: string, quote: string, specifier: string) => {
    const source = entries.get(specifier);
    return source === undefined ? whole : `${keyword}${quote}${to(source)}${quote}`;
  });
}

/** Writes the project (replacing any earlier one); returns each module's source and the tsconfig's path. */
export function writeBlockProject(): { tsconfig: string; sources: Map<string, BlockSource> } {
  rmSync(PROJECT, { recursive: true, force: true });
  mkdirSync(PROJECT, { recursive: true });
  const entries = entryPoints();
  const sources = new Map<string, BlockSource>();
  for (const file of docFiles()) {
    for (const block of codeBlocks(readDoc(file))) {
      if (!TS_LANGS.has(block.lang)) continue;
      const name = `${file.replace(/\.md$/, "").replace(/\//g, "--")}--L${block.line}.ts`;
      const code = rewriteImports(block.code, entries, (source) => relative(PROJECT, join(ROOT, source)));
      writeFileSync(join(PROJECT, name), `${code}\nexport {};\n`);
      sources.set(name, { file, line: block.line });
    }
  }
  const tsconfig = join(PROJECT, "tsconfig.json");
  const config = {
    extends: relative(PROJECT, join(ROOT, "tsconfig.json")),
    compilerOptions: { noEmit: true, declaration: false, allowImportingTsExtensions: true },
    include: [],
    files: [relative(PROJECT, join(ROOT, "test/docs/fragment-globals.d.ts")), ...sources.keys()],
  };
  writeFileSync(tsconfig, JSON.stringify(config, null, 2));
  return { tsconfig, sources };
}

/**
 * tsc's diagnostics (`file(line,col): error TSnnnn: …`), those in a block
 * named by the Markdown file and line they come from.
 */
export function located(output: string, sources: Map<string, BlockSource>): string[] {
  const errors: string[] = [];
  for (const line of output.split("\n")) {
    const m = /^(.*?)\((\d+),(\d+)\): (error .*)$/.exec(line.trim());
    if (!m) {
      if (line.trim() !== "" && errors.length > 0) errors[errors.length - 1] += ` ${line.trim()}`;
      continue;
    }
    const [, path, row, col, message] = m;
    const name = path!.split(/[\\/]/).at(-1)!;
    const source = sources.get(name);
    errors.push(source ? `${source.file}:${source.line + Number(row) - 1}:${col}: ${message}` : `${path}(${row},${col}): ${message}`);
  }
  return errors;
}
