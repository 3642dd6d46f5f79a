import { spawn } from "node:child_process";
import { join } from "node:path";

const CHILD = join(import.meta.dirname, "chaos-worker.ts");

/** A worker process of the connection-loss tests (chaos-worker.ts), seen from the parent. */
export interface ChaosChild {
  /** Handler runs per job payload. */
  readonly runs: Map<number, number>;
  /** The child's exit code once it exited, else undefined. */
  exitCode(): number | null | undefined;
  stderr(): string;
  /** Asks the worker to stop gracefully; resolves with its exit code and final report. */
  stop(): Promise<{ code: number | null; report: Record<string, number> | null }>;
  kill(): void;
}

export function startChaosChild(kind: "postgres" | "mysql", url: string): ChaosChild {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, kind, url], { stdio: ["pipe", "pipe", "pipe"] });
  const runs = new Map<number, number>();
  let report: Record<string, number> | null = null;
  let stderr = "";
  let code: number | null | undefined;
  let buffered = "";
  child.stderr.on("data", (d) => (stderr += d));
  child.stdout.on("data", (d) => {
    buffered += d;
    const lines = buffered.split("\n");
    buffered = lines.pop()!;
    for (const line of lines) {
      const m = JSON.parse(line) as { ran?: number; report?: Record<string, number> };
      if (m.ran !== undefined) runs.set(m.ran, (runs.get(m.ran) ?? 0) + 1);
      if (m.report) report = m.report;
    }
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (c) => resolve((code = c))));
  return {
    runs,
    exitCode: () => code,
    stderr: () => stderr,
    stop: async () => {
      child.stdin.write("stop\n");
      return { code: await exited, report };
    },
    kill: () => void child.kill("SIGKILL"),
  };
}
