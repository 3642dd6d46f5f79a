import { execFile } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { PROJECT, located, writeBlockProject } from "./code-blocks.ts";
import { ROOT } from "./markdown.ts";

const run = promisify(execFile);

/**
 * Every ```ts / ```typescript block of README.md and docs/*.md type-checks
 * against docket's sources (strict, NodeNext, the repository's tsconfig),
 * in one tsc run. A block that is not meant as TypeScript takes another
 * fence language (```text). On failure the generated modules stay in
 * test-artifacts/docs-code-blocks/ for inspection.
 */
describe("documentation code blocks", () => {
  it("every TypeScript block of README.md and docs/*.md type-checks", { timeout: 120_000 }, async () => {
    const { tsconfig, sources } = writeBlockProject();
    expect([...sources.values()].some((s) => s.file === "README.md")).toBe(true);
    const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
    const output = await run(process.execPath, [tsc, "-p", tsconfig, "--pretty", "false"], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 }).then(
      (done) => done.stdout,
      (failed: { stdout?: string; stderr?: string; message: string }) => failed.stdout || failed.stderr || failed.message,
    );
    expect(located(output, sources)).toEqual([]);
    expect(output.trim()).toBe("");
    rmSync(PROJECT, { recursive: true, force: true });
  });
});
