import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Application, Logger, LogLevel, ReflectionKind, TSConfigReader, TypeDocReader, type MinimalNode, type MinimalSourceFile, type ProjectReflection } from "typedoc";
import { ROOT } from "./markdown.ts";

/** Every message TypeDoc logs at warning or error level, with its file and line when it names one. */
class CollectingLogger extends Logger {
  readonly problems: string[] = [];

  override log(message: string, level: LogLevel): void {
    super.log(message, level);
    // A checkout without a usable "origin" (a local clone, a tarball) only loses source links: that is the checkout, not the docs.
    if (level >= LogLevel.Warn && !/git remote "origin" was not valid/.test(message)) this.problems.push(message);
  }

  protected override addContext(message: string, level: Exclude<LogLevel, LogLevel.None>, ...args: [MinimalNode?] | [number, MinimalSourceFile]): string {
    const prefix = level === LogLevel.Error ? "error" : level === LogLevel.Warn ? "warning" : "info";
    const [first, second] = args;
    const [pos, file] = typeof first === "number" ? [first, second] : first ? [first.getStart(), first.getSourceFile()] : [undefined, undefined];
    if (pos === undefined || file === undefined) return `[${prefix}] ${message}`;
    const { line } = file.getLineAndCharacterOfPosition(pos);
    return `[${prefix}] ${(file.fileName.startsWith(ROOT) ? file.fileName.slice(ROOT.length) : file.fileName)}:${line + 1}: ${message}`;
  }
}

/** The source file of each public entry point, from package.json "exports" (dist/X.d.ts is built from src/X.ts). */
function exportedEntryPoints(): string[] {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { exports: Record<string, { types: string }> };
  return Object.values(pkg.exports).map((e) => e.types.replace(/^\.\/dist\//, "src/").replace(/\.d\.ts$/, ".ts"));
}

/**
 * The API reference (`npm run docs:api`, typedoc.json) builds from the
 * TSDoc comments with no warning and no error: every `{@link}` resolves,
 * every type the public API names is documented (exported from an entry
 * point, or `@internal`), every tag is known. The HTML is rendered to a
 * temporary directory, so that warnings TypeDoc only gives while rendering
 * count too.
 */
describe("API reference", () => {
  const logger = new CollectingLogger();
  const out = mkdtempSync(join(tmpdir(), "docket-api-"));
  let app: Application;
  let project: ProjectReflection | undefined;

  beforeAll(async () => {
    app = await Application.bootstrapWithPlugins({ options: join(ROOT, "typedoc.json") }, [new TypeDocReader(), new TSConfigReader()]);
    // Option problems were logged by the console logger bootstrap used.
    expect(app.logger.errorCount + app.logger.warningCount, "typedoc.json's options (see the messages above)").toBe(0);
    app.logger = logger;
    project = await app.convert();
    if (project === undefined) return;
    app.validate(project);
    await app.generateDocs(project, out);
  }, 60_000);

  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it("typedoc.json documents exactly the entry points package.json exports", () => {
    const entryPoints = app.options.getValue("entryPoints").map((p) => (p.startsWith(ROOT) ? p.slice(ROOT.length) : p));
    expect([...entryPoints].sort()).toEqual(exportedEntryPoints().sort());
  });

  it("builds with no warning and no error", () => {
    expect(logger.problems).toEqual([]);
    expect(project).toBeDefined();
    const reflections = Object.values(project!.reflections);
    const modules = project!.getReflectionsByKind(ReflectionKind.Module);
    const commented = reflections.filter((r) => r.hasComment()).length;
    console.log(`TypeDoc ${Application.VERSION}: ${modules.length} entry points (${modules.map((m) => m.name).join(", ")}), ${reflections.length} reflections documented (${commented} with a comment), 0 warnings, 0 errors`);
    expect(modules.length).toBe(exportedEntryPoints().length);
  });
});
