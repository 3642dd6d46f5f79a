import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { cruise, type ICruiseResult } from "dependency-cruiser";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = resolve(".");
const rules = createRequire(import.meta.url)(join(ROOT, ".dependency-cruiser.cjs"));

/** The rule violations dependency-cruiser finds under `dir` (relative to `baseDir`), as "rule: from → to" lines. */
async function violations(dir: string, baseDir: string): Promise<string[]> {
  const result = await cruise([dir], { validate: true, ruleSet: { forbidden: rules.forbidden }, ...rules.options, baseDir, tsConfig: undefined }, { extensions: [".ts", ".js"] });
  const output = result.output as ICruiseResult;
  return output.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.cycle ? v.cycle.map((c) => c.name).join(" → ") : v.to}`);
}

const planted = mkdtempSync(join(tmpdir(), "docket-arch-"));
afterAll(() => rmSync(planted, { recursive: true, force: true }));

function plant(files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(planted, path)), { recursive: true });
    writeFileSync(join(planted, path), text);
  }
}

/** The import rules of .dependency-cruiser.cjs, on every `npm test`. */
describe("architecture", () => {
  it("src keeps every import rule of .dependency-cruiser.cjs", async () => {
    expect(await violations("src", ROOT)).toEqual([]);
  });

  it("a planted forbidden import fails the check (core importing the dashboard, an adapter importing another, the worker importing the client)", async () => {
    plant({
      "src/core/policy.ts": 'import { page } from "../dashboard/page.ts";\nexport const p = page;\n',
      "src/dashboard/page.ts": "export const page = 1;\n",
      "src/adapters/mysql/engine.ts": 'import { x } from "../postgres/engine.ts";\nexport const y = x;\n',
      "src/adapters/postgres/engine.ts": "export const x = 1;\n",
      "src/worker/producer.ts": 'import { Docket } from "../client/docket.ts";\nexport const d = Docket;\n',
      "src/client/docket.ts": "export class Docket {}\n",
    });
    expect((await violations("src", planted)).sort()).toEqual([
      "adapters-apart: src/adapters/mysql/engine.ts → src/adapters/postgres/engine.ts",
      "core-is-policy: src/core/policy.ts → src/dashboard/page.ts",
      "worker-sees-host-only: src/worker/producer.ts → src/client/docket.ts",
    ]);
  });
});
