/**
 * Worker processes of the benchmarks, driven by one JSON line each way (see
 * bench/drain-child.ts): they print {ready}, start on {go}, print
 * {progress, n} as jobs finish, and on {stop} print {done, …} and exit.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

export interface Child {
  send(m: object): void;
  next(pred: (m: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  onProgress(fn: (n: number) => void): void;
}

/** Starts `node --import tsx …argv`. */
export function startChild(argv: string[]): Child {
  const p = spawn(process.execPath, ["--import", "tsx", ...argv], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const waiters: { pred: (m: Record<string, unknown>) => boolean; resolve: (m: Record<string, unknown>) => void }[] = [];
  let progress = (_n: number) => undefined as void;
  createInterface({ input: p.stdout! }).on("line", (line) => {
    let m: Record<string, unknown>;
    try {
      m = JSON.parse(line);
    } catch {
      process.stderr.write(`child: ${line}\n`);
      return;
    }
    if (m.progress) progress(Number(m.n));
    const i = waiters.findIndex((w) => w.pred(m));
    if (i >= 0) waiters.splice(i, 1)[0]!.resolve(m);
  });
  p.on("exit", (code) => {
    if (code !== 0) console.error(`drain child exited with ${code}`);
  });
  return {
    send: (m) => p.stdin!.write(JSON.stringify(m) + "\n"),
    next: (pred) => new Promise((resolve) => waiters.push({ pred, resolve })),
    onProgress: (fn) => (progress = fn),
  };
}

