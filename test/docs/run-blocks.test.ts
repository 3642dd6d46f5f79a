import { describe, expect, it } from "vitest";
import { checkShellBlocks, plannedBlocks, runBlocks, summary } from "./run-blocks.ts";

/**
 * Every ```ts / ```typescript block of README.md and docs/*.md runs (see
 * run-blocks.ts for how, and docs/testing.md for the `<!-- run: … -->`
 * markers): each in a fresh directory on its own database, at most two at a
 * time. A block passes when it ran without throwing and what it started was
 * stopped, or when its marker gives a reason not to run it.
 */
describe("documentation code blocks", () => {
  it("every TypeScript block of README.md and docs/*.md runs, or says why not", { timeout: 180_000 }, async () => {
    const blocks = plannedBlocks();
    expect(blocks.some((b) => b.where.startsWith("README.md:"))).toBe(true);
    const results = await runBlocks(blocks, 2);
    console.log(summary(results));
    const failed = results.filter((r) => r.outcome === "failed").map((r) => `${r.block.where}: ${r.detail}`);
    expect(failed).toEqual([]);
  });

  it("every npm script, and every repository file given to tsx or deno, that a shell block names exists", () => {
    const { checked, problems } = checkShellBlocks();
    expect(checked).toBeGreaterThan(0);
    expect(problems).toEqual([]);
  });
});
