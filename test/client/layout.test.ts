import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

/** Every .ts file under `dir`, recursively, relative to the repository root. */
function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []));
}

/** The relative imports and re-exports of `file`: what each resolves to (from the root), and whether it is type-only. */
function imports(file: string): { target: string; typeOnly: boolean }[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/^\s*(import|export)\s+(type\s)?[^;]*?from\s+"(\.[^"]+)"/gms)].map((m) => ({
    target: relative(".", resolve(dirname(file), m[3]!)),
    typeOnly: m[2] !== undefined,
  }));
}

describe("the client façade's layout", () => {
  it("nothing in src/core imports src/dashboard (the dashboard is a function of a Docket; core/index.ts re-exports none of it)", () => {
    const arrows = files("src/core").flatMap((f) => imports(f).filter((i) => i.target.startsWith("src/dashboard/")).map((i) => `${f} -> ${i.target}`));
    expect(arrows).toEqual([]);
  });

  it("src/dashboard imports no value from src/client, and adapters import nothing from it", () => {
    const fromDashboard = files("src/dashboard").flatMap((f) => imports(f).filter((i) => i.target.startsWith("src/client/") && !i.typeOnly).map((i) => `${f} -> ${i.target}`));
    const fromAdapters = files("src/adapters").flatMap((f) => imports(f).filter((i) => i.target.startsWith("src/client/")).map((i) => `${f} -> ${i.target}`));
    expect([...fromDashboard, ...fromAdapters]).toEqual([]);
  });

  it("every file of src/client says first what it holds and has at most 350 lines", () => {
    const client = files("src/client");
    expect(client).toContain("src/client/docket.ts");
    for (const f of client) {
      const text = readFileSync(f, "utf8");
      expect(text.startsWith("/**"), `${f} starts with its comment`).toBe(true);
      expect(text.split("\n").length, f).toBeLessThanOrEqual(350);
    }
  });

  it("docket.on accepts exactly the event types of the one list in core/events.ts", async () => {
    // Loaded here so that the layout checks above run (and fail by name) on a tree without these modules.
    const { EVENT_TYPES } = await import("../../src/core/events.ts");
    const { Docket } = await import("../../src/client/docket.ts");
    const { memoryAdapter } = await import("../../src/adapters/memory/index.ts");
    const docket = new Docket({ adapter: memoryAdapter() });
    for (const type of EVENT_TYPES) docket.on(type, () => undefined)();
    expect(() => docket.on("retry" as never, () => undefined)).toThrow(`unknown event type "retry"; known: *, ${EVENT_TYPES.join(", ")}`);
  });
});
