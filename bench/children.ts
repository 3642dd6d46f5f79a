/**
 * Worker processes of the benchmarks, driven by one JSON line each way (see
 * bench/drain-child.ts): they print {ready}, start on {go}, print
 * {progress, n, at, rssMb} as jobs finish (`at`: the wall-clock time in ms,
 * sub-millisecond, at which the n-th job finished; `rssMb`: the peak RSS
 * then), and on {stop} print {done, …} and exit. A report is sent up to a
 * timer tick after `at`, later if the worker keeps the event loop busy:
 * rates are computed from `at`, not from when a report arrives.
 */
import { spawn } from "node:child_process";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { createInterface } from "node:readline";

export interface Child {
  send(m: object): void;
  next(pred: (m: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  onProgress(fn: (n: number, at: number, rssMb: number) => void): void;
}

/** The wall-clock time in ms, sub-millisecond, comparable between processes. */
export const wallNow = (): number => performance.timeOrigin + performance.now();

/**
 * The longest the child's event loop was held (ms) between `start()` and
 * `stop()`: a worker whose database calls run on its thread (SQLite) holds
 * it while a statement runs and while a batch's handlers chain.
 */
export function loopDelayMonitor(): { start(): void; stop(): number } {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  return {
    start: () => histogram.enable(),
    stop: () => (histogram.disable(), histogram.max / 1e6),
  };
}

/**
 * Starts `node --import tsx …argv`. BENCH_NODE_FLAGS (space-separated) are
 * passed to each child's node, e.g. `--cpu-prof --cpu-prof-dir=/tmp/p` (flags
 * that NODE_OPTIONS refuses).
 */
export function startChild(argv: string[]): Child {
  const flags = (process.env.BENCH_NODE_FLAGS ?? "").split(" ").filter((f) => f !== "");
  const p = spawn(process.execPath, [...flags, "--import", "tsx", ...argv], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const waiters: { pred: (m: Record<string, unknown>) => boolean; resolve: (m: Record<string, unknown>) => void }[] = [];
  let progress = (_n: number, _at: number, _rssMb: number) => undefined as void;
  createInterface({ input: p.stdout! }).on("line", (line) => {
    let m: Record<string, unknown>;
    try {
      m = JSON.parse(line);
    } catch {
      process.stderr.write(`child: ${line}\n`);
      return;
    }
    if (m.progress) progress(Number(m.n), Number(m.at), Number(m.rssMb));
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

