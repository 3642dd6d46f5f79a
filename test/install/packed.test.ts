import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const ROOT = resolve(".");
const TSX = resolve("node_modules/.bin/tsx");
const dir = mkdtempSync(join(tmpdir(), "docket-install-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The README's Quick start code block, as written. */
function quickStart(): string {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Quick start"));
  const block = /```ts\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error("README has no ts block under Quick start");
  return block[1]!;
}

/**
 * A new user's install, as the README's Install section says: `npm pack` in
 * a clone, then `npm i <tarball> better-sqlite3` in an ESM app. The driver is
 * linked from this checkout rather than compiled again (2 minutes).
 */
describe("install from a packed tarball", () => {
  it("packs dist, LICENSE and the README, and the Quick start runs from the tarball", { timeout: 180_000 }, async () => {
    const packed = await run("npm", ["pack", "--json", "--pack-destination", dir], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 });
    const info = JSON.parse(packed.stdout.slice(packed.stdout.indexOf("["))) as { filename: string; files: { path: string }[] }[];
    const files = info[0]!.files.map((f) => f.path);
    expect(files).toContain("LICENSE");
    expect(files).toContain("dist/index.js");
    expect(files).toContain("dist/cli/bin.js");
    expect(files).toContain("dist/adapters/sqlite/index.js");
    // The README's links to the guides resolve in node_modules/docket too.
    for (const link of readFileSync(join(ROOT, "README.md"), "utf8").matchAll(/\]\((docs\/[^)#]+\.md)/g)) expect(files).toContain(link[1]);

    const app = join(dir, "app");
    await run("mkdir", ["-p", app]);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    await run("npm", ["i", "--no-audit", "--no-fund", "--prefer-offline", join(dir, info[0]!.filename)], { cwd: app, maxBuffer: 64 * 1024 * 1024 });
    symlinkSync(join(ROOT, "node_modules/better-sqlite3"), join(app, "node_modules/better-sqlite3"));
    expect(existsSync(join(app, "node_modules/docket/LICENSE"))).toBe(true);

    writeFileSync(join(app, "quickstart.ts"), quickStart());
    const out = await new Promise<{ code: number | null; stdout: string }>((done, fail) => {
      const child = spawn(TSX, ["quickstart.ts"], { cwd: app, stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
      child.stdout.on("data", (d: Buffer) => {
        stdout += d.toString();
        if (stdout.includes("succeeded; Ctrl-C to stop")) child.kill("SIGINT");
      });
      child.on("error", fail);
      child.on("exit", (code) => {
        clearTimeout(timer);
        done({ code, stdout });
      });
    });
    expect(out.stdout).toMatch(/enqueued job \d+: ready/);
    expect(out.stdout).toMatch(/job \d+ succeeded; Ctrl-C to stop/);
    // stopOnSignals stops gracefully, then re-raises SIGINT: the conventional 128 + 2.
    expect(out.code).toBe(130);

    const status = await run(join(app, "node_modules/.bin/docket"), ["status", "--url", "sqlite:jobs.db"], { cwd: app });
    expect(status.stdout).toContain("default");
  });
});
