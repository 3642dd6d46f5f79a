import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Docket } from "../../src/client/docket.ts";
import { sqliteAdapter } from "../../src/adapters/sqlite/index.ts";

const CHILD = join(import.meta.dirname, "../support/signal-child.ts");

/** SIGINT/SIGTERM stop the worker gracefully; its jobs are released, not left to expire. */
describe("worker.stopOnSignals()", () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`on ${signal}: releases in-flight jobs to ready without spending an attempt, then ends the process by that signal`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "docket-signal-"));
      try {
        const file = join(dir, "jobs.db");
        const child = spawn(process.execPath, ["--import", "tsx", CHILD, file], { stdio: ["ignore", "pipe", "pipe"] });
        let err = "";
        child.stderr.on("data", (d) => (err += d));
        const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
          child.on("exit", (code, sig) => resolve({ code, signal: sig })),
        );
        await new Promise<void>((resolve, reject) => {
          child.stdout.on("data", (d) => String(d).includes("running") && resolve());
          void exited.then(() => reject(new Error(`child exited before running: ${err}`)));
        });
        child.kill(signal);
        const end = await exited;
        expect(end, err).toEqual({ code: null, signal });
        const docket = new Docket({ adapter: sqliteAdapter({ filename: file }) });
        try {
          const jobs = await docket.list();
          expect(jobs.map((j) => [j.task, j.state, j.attempt, j.leaseToken])).toEqual([
            ["polite", "ready", 0, null],
            ["stubborn", "ready", 0, null],
          ]);
        } finally {
          await docket.close();
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }, 30_000);
  }
});
