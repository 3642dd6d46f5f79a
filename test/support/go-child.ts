import { spawn } from "node:child_process";
import type { DocketAdapter } from "../../src/core/adapter.ts";

/**
 * A child process that prints "ready", waits for "go" on stdin (so that
 * several start together), then prints one JSON line and exits 0.
 */
export interface GoChild<R> {
  ready: Promise<void>;
  go(): void;
  /** The JSON line, or a rejection with the child's stderr when it exits non-zero. */
  result: Promise<R>;
}

export function spawnGoChild<R>(script: string, args: string[], what: string): GoChild<R> {
  const child = spawn(process.execPath, ["--import", "tsx", script, ...args], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  let readyResolve!: () => void;
  const ready = new Promise<void>((r) => (readyResolve = r));
  child.stdout.on("data", (d) => {
    out += d;
    if (out.startsWith("ready\n")) readyResolve();
  });
  const result = new Promise<R>((resolve, reject) =>
    child.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out.split("\n")[1]!) as R) : reject(new Error(`${what} exited ${code}: ${err}`)))),
  );
  return { ready, go: () => child.stdin.end("go\n"), result };
}

/** In a child: the adapter its argv names (sqlite file, PostgreSQL or MySQL URL), with a table prefix. */
export async function openChildAdapter(adapter: string, target: string, tablePrefix: string, connections = 4): Promise<DocketAdapter> {
  if (adapter === "sqlite") return (await import("../../src/adapters/sqlite/index.ts")).sqliteAdapter({ filename: target, tablePrefix, busyTimeoutMs: 30_000 });
  if (adapter === "postgres") return (await import("../../src/adapters/postgres/index.ts")).postgresAdapter({ connectionString: target, tablePrefix, max: connections });
  return (await import("../../src/adapters/mysql/index.ts")).mysqlAdapter({ uri: target, tablePrefix, connectionLimit: connections });
}

/** In a child: resolves when the parent writes "go". */
export async function waitForGo(): Promise<void> {
  const { createInterface } = await import("node:readline");
  process.stdout.write("ready\n");
  for await (const line of createInterface({ input: process.stdin })) if (line === "go") return;
}
