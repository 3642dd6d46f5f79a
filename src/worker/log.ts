/** The worker's log: the WorkerLogger option, its validation, and one-line formatting of what a worker reports. */
import { InvalidArgumentError } from "../core/errors.ts";
import type { Job } from "../core/job.ts";

/**
 * Where a worker reports what it survived and how attempts ended. `console`
 * fits. `warn` is required: survived errors, failed attempts that will
 * retry, attempts reclaimed or lost. `info` (attempts ended by a cancel) is
 * optional: without it those lines are dropped. `error` (dead letters) is
 * optional: without it they go to `warn`.
 */
export interface WorkerLogger {
  warn(message: string, ...details: unknown[]): void;
  info?(message: string, ...details: unknown[]): void;
  error?(message: string, ...details: unknown[]): void;
}

/** The logger option as given (undefined: `console`), checked; null silences the worker. */
export function validateLogger(logger: unknown): WorkerLogger | null {
  if (logger === undefined) return console;
  if (logger === null) return null;
  if (typeof logger !== "object" || typeof (logger as WorkerLogger).warn !== "function") {
    throw new InvalidArgumentError("logger must have a warn(message) method (and optionally info and error), or be null");
  }
  for (const level of ["info", "error"] as const) {
    const method = (logger as WorkerLogger)[level];
    if (method !== undefined && typeof method !== "function") throw new InvalidArgumentError(`logger.${level} must be a function when given`);
  }
  return logger as WorkerLogger;
}

/** The longest error text one log line quotes. */
const MAX_LOGGED_ERROR = 300;
/** The longest task name one log line quotes. */
const MAX_LOGGED_NAME = 100;

/**
 * `text` fit for one log line: its first line (an Error's stack keeps only
 * "Name: message"), control characters and bidi marks replaced by spaces, at most `max`
 * characters; "…" marks a cut.
 */
export function oneLine(text: string, max = MAX_LOGGED_ERROR): string {
  const lines = text.split(/\r\n|\n|\r/);
  // Control characters and the bidirectional marks and overrides (which reorder what a reader sees: core/unsafe-text.ts).
  let line = lines[0]!.replace(/[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, " ");
  let cut = lines.length > 1 && !/^\s+at /.test(lines[1]!);
  if (line.length > max) {
    line = line.slice(0, max);
    cut = true;
  }
  return cut ? `${line}…` : line;
}

/** "job 12 (email.send) attempt 1/3": which attempt a line is about. */
export function attemptLabel(job: Pick<Job, "id" | "task" | "attempt" | "maxAttempts">): string {
  return `job ${job.id} (${oneLine(job.task, MAX_LOGGED_NAME)}) attempt ${job.attempt}/${job.maxAttempts}`;
}

/** Writes one line per call at its level, with the documented fallbacks. A logger that throws is ignored. */
export class WorkerLog {
  readonly #logger: WorkerLogger | null;

  constructor(logger: WorkerLogger | null) {
    this.#logger = logger;
  }

  info(message: string): void {
    this.#write("info", message);
  }

  warn(message: string): void {
    this.#write("warn", message);
  }

  error(message: string): void {
    this.#write("error", message);
  }

  #write(level: "info" | "warn" | "error", message: string): void {
    const logger = this.#logger;
    if (!logger) return;
    try {
      if (level === "warn") logger.warn(`docket worker: ${message}`);
      else if (typeof logger[level] === "function") logger[level]!(`docket worker: ${message}`);
      else if (level === "error") logger.warn(`docket worker: ${message}`);
    } catch {
      // A logger's failure must not affect the job.
    }
  }
}
