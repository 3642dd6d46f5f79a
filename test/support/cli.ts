/**
 * The `docket` command as a user runs it: a child process of src/cli/bin.ts.
 *
 * `BIN` is src/cli/bin.ts bundled once per test process by esbuild (the
 * package's dependencies left as imports), so each command starts in plain
 * node (about 0.25 s) instead of compiling every source file under tsx
 * (about 0.7 s). The bundle is the same sources as dist/cli/bin.js;
 * test/install/packed.test.ts runs the packed package's own bin.
 */
import { execFile } from "node:child_process";
import { mkdirSync, renameSync } from "node:fs";
import { resolve } from "node:path";
import { buildSync } from "esbuild";

/** The node binary that runs `BIN`. */
export const NODE = process.execPath;
/** The bundled CLI: run it as `NODE BIN …args`. */
export const BIN = bundleCli();

function bundleCli(): string {
  // Inside node_modules, so that the bundle's package imports resolve; a rename makes the file whole for other processes that read it.
  const dir = resolve("node_modules/.cache/docket-cli-test");
  mkdirSync(dir, { recursive: true });
  const target = resolve(dir, "bin.mjs");
  const scratch = resolve(dir, `bin-${process.pid}.mjs`);
  buildSync({ entryPoints: [resolve("src/cli/bin.ts")], bundle: true, platform: "node", format: "esm", target: "node20", packages: "external", outfile: scratch, logLevel: "error" });
  renameSync(scratch, target);
  return target;
}

export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `docket …args` with `--url url` (none when null; DOCKET_URL is cleared); its exit code and output (npm's warnings removed). */
export function runCli(url: string | null, ...args: string[]): Promise<Ran> {
  return new Promise((done) => {
    execFile(NODE, [BIN, ...args, ...(url === null ? [] : ["--url", url])], { timeout: 60_000, env: { ...process.env, DOCKET_URL: "" } }, (error, stdout, stderr) => {
      done({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr: stderr.replace(/^npm warn.*\n/gm, "") });
    });
  });
}
