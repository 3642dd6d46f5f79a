import { describe, expect, it } from "vitest";
import { checkShellBlocks, planBlock, plannedBlocks, runBlocks, summary } from "./run-blocks.ts";

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

  it("the markers are read as docs/testing.md says, and a block that throws or whose job dies fails", { timeout: 60_000 }, async () => {
    expect(planBlock("a", "x", "run: skip — needs a container runtime").skip).toBe("needs a container runtime");
    expect(planBlock("a", "x", "run: skip").invalid).toMatch(/needs a reason/);
    expect(planBlock("a", "x", "run: frobnicate").invalid).toMatch(/unknown run directive/);
    expect(planBlock("a", "x", "run: start-only").startOnlyMs).toBe(2000);
    expect(planBlock("a", "x", "run: mysql; start-only 500 ms")).toMatchObject({ target: "mysql", startOnlyMs: 500, invalid: null });
    expect(planBlock("a", 'import pg from "pg";', null).target).toBe("postgres");
    expect(planBlock("a", 'import { mysqlAdapter } from "docket/mysql";', null).target).toBe("mysql");
    expect(planBlock("a", 'import { Docket } from "@docket/docket";', null).runtime).toBe("deno");
    expect(planBlock("a", "x", "a comment that is no marker")).toMatchObject({ target: "sqlite", runtime: "node", skip: null, invalid: null });

    const results = await runBlocks(
      [
        planBlock("throws", 'throw new Error("boom");', null),
        planBlock("dies", 'await docket.enqueue("t", {}, { maxAttempts: 1 });\nawait docket.worker({ handlers: { t: async () => { throw new Error("handler boom"); } } }).start();', null),
        planBlock("forever", "await new Promise(() => setInterval(() => {}, 1000));", "run: start-only 300 ms"),
      ],
      2,
    );
    expect(results.map((r) => r.outcome)).toEqual(["failed", "failed", "ran"]);
    expect(results[0]!.detail).toContain("Error: boom");
    expect(results[1]!.detail).toContain("dead job 1 (t): Error: handler boom");
  });
});
