/** The `docket` command as a user runs it: a child process of src/cli/bin.ts under tsx. */
import { execFile } from "node:child_process";
import { resolve } from "node:path";

export const TSX = resolve("node_modules/.bin/tsx");
export const BIN = resolve("src/cli/bin.ts");

export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `docket …args` with `--url url` (none when null; DOCKET_URL is cleared); its exit code and output (npm's warnings removed). */
export function runCli(url: string | null, ...args: string[]): Promise<Ran> {
  return new Promise((done) => {
    execFile(TSX, [BIN, ...args, ...(url === null ? [] : ["--url", url])], { timeout: 60_000, env: { ...process.env, DOCKET_URL: "" } }, (error, stdout, stderr) => {
      done({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr: stderr.replace(/^npm warn.*\n/gm, "") });
    });
  });
}
