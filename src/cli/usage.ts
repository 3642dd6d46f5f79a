/** A command line docket cannot act on: printed with the usage, exit code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** Exit codes, as documented in `docket --help` and docs/operating.md ("CLI"). */
export const EXIT = {
  ok: 0,
  /** The operation was refused: no such job, a job in the wrong state, invalid input. */
  refused: 1,
  usage: 2,
  /** The database could not be reached, does not exist (a SQLite file), or failed. */
  database: 3,
} as const;

export const USAGE = `docket — operate a docket job queue

Usage: docket <command> [arguments] --url <url> [--prefix <table prefix>] [--json]
       docket --help | help        this text
       docket --version | -v       the version

  --url     postgres://user@host/db | mysql://user@host/db | sqlite:path/to/file.db
            (default: the DOCKET_URL environment variable; only migrate creates
            a SQLite file; messages never show the URL's password)
  --prefix  table prefix (default docket_)
  --json    print JSON instead of tables
  Names, errors and payloads are printed with control characters escaped (\\x1b, \\u009b).

Commands:
  migrate                                  bring the schema up to date
  status [--window 15m]                    queues, tasks, running jobs, keys, throughput
  jobs list [--state S] [--queue Q] [--task T] [--key K] [--error TEXT] [--limit N] [--after ID]
                                           --key: a concurrency key's holders and blocked jobs;
                                           --error: jobs whose last error contains TEXT (give --state dead)
  jobs show <id>                           one job: payload, result, attempts, errors, steps
  jobs cancel <id>
  jobs retry <id>                          a dead job: replay it; a scheduled one: make it due now
  jobs delete <id>                         delete a finished (succeeded, cancelled, dead) job
  jobs bulk <cancel|delete|run-now|replay> --state S [--queue Q] [--task T] [--key K]
    --dry-run | --expect N                 every job the filter selects: --dry-run prints how
                                           many; --expect N (that count) does it, to at most N
  dlq list [--queue Q] [--task T] [--limit N]
  dlq replay <id>
  dlq replay-all [--queue Q] [--task T] [--limit N] [--dry-run]
  dlq purge [--queue Q] [--task T] [--older-than 7d] | --all   [--dry-run]
                                           delete dead jobs; with no filter, --all is required;
                                           --dry-run prints how many and changes nothing
  queues list
  queues pause <queue> | resume <queue> | cap <queue> <n|none>
  queues rate <queue> <n/duration|none>    e.g. 100/1m: at most 100 jobs start in any minute
  tasks cap <task> <n|none> | rate <task> <n/duration|none>
  schedules list                           recurring jobs with their last and next tick
  schedules run <name>                     enqueue the schedule's job now (its ticks go on)
  schedules pause <name> | resume <name>   stop its ticks; resume from the next one (none fired for the pause)
  workers list                             running workers: host, pid, queues, jobs in hand, heartbeat
  purge --older-than <duration>            delete succeeded, cancelled and dead jobs finished before
  dashboard [--port 8080] [--host ADDR]    serve the dashboard on 127.0.0.1 (or ADDR) until Ctrl-C;
    [--read-only] [--no-auth]              it asks for the password it prints (or
    [--allow-host NAME]...                 DOCKET_DASHBOARD_TOKEN) and serves only Hosts naming
    [--public-origin URL] [--trust-proxy]  it or an --allow-host; --no-auth only on loopback

Durations: 500ms, 30s, 15m, 12h, 7d.
Exit codes: 0 done; 1 refused (unknown job, wrong state, invalid input); 2 usage; 3 database unreachable, missing (no SQLite file) or failed.`;

/** `500ms`, `30s`, `15m`, `12h`, `7d` → milliseconds. */
export function parseDuration(text: string, what: string): number {
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(text);
  if (!m) throw new UsageError(`${what} must be a duration like 30s, 15m, 12h or 7d, got ${JSON.stringify(text)}`);
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as "ms" | "s" | "m" | "h" | "d"];
  return Number(m[1]) * unit;
}

/** `ms` in the largest unit that holds it whole (`60000` → `1m`, `1500` → `1500ms`): what parseDuration reads back as `ms`. */
export function durationText(ms: number): string {
  for (const [unit, size] of [["d", 86_400_000], ["h", 3_600_000], ["m", 60_000], ["s", 1_000]] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

export function parseCount(text: string | undefined, what: string, fallback: number): number {
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text) || Number(text) < 1) throw new UsageError(`${what} must be a positive integer, got ${JSON.stringify(text)}`);
  return Number(text);
}

export function parseId(text: string | undefined): number {
  if (text === undefined) throw new UsageError("a job id is required");
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text)) || Number(text) < 1) throw new UsageError(`a job id is a positive integer, got ${JSON.stringify(text)}`);
  return Number(text);
}
