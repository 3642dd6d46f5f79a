import { attemptRuntime, type Job } from "../core/job.ts";
import type { DocketStats } from "../client/stats.ts";
import type { StoreHealth } from "../core/adapter.ts";
import { oneLine, printable } from "./terminal-text.ts";

/** Left-aligned columns, a header and a rule; each cell on one line, its control characters escaped (see oneLine). */
export function table(header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map((c) => oneLine(String(c))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) => r.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd();
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...cells.slice(1).map(line)].join("\n");
}

export function time(ms: number | null): string {
  return ms === null ? "-" : new Date(ms).toISOString().replace(".000Z", "Z");
}

export function age(ms: number): string {
  if (ms < 1_000) return `${ms}ms`;
  if (ms < 60_000) return `${Math.round(ms / 1_000)}s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)}m`;
  return `${(ms / 3_600_000).toFixed(1)}h`;
}

export function jobsTable(jobs: Job[]): string {
  if (jobs.length === 0) return "(no jobs)";
  return table(
    ["id", "task", "queue", "state", "attempt", "run at", "key", "last error"],
    jobs.map((j) => [j.id, j.task, j.queue, j.state, `${j.attempt}/${j.maxAttempts}`, time(j.runAt), j.concurrencyKey ?? "-", (j.lastError ?? "-").split("\n")[0]!.slice(0, 60)]),
  );
}

/** A runtime in ms as the CLI prints it, or "-". */
function runtimeText(ms: number | null): string {
  return ms === null ? "-" : ms < 1_000 ? `${ms} ms` : `${(ms / 1_000).toFixed(ms < 60_000 ? 2 : 0)} s`;
}

/**
 * One job, a field a line; every value on one line with its control
 * characters escaped, but the last error, whose own lines are kept,
 * each indented under its first: no line of an error can pass for a field.
 */
export function jobDetail(j: Job): string {
  const rows: [string, string][] = [
    ["id", String(j.id)],
    ["task", j.task],
    ["queue", j.queue],
    ["state", j.state],
    ["attempt", `${j.attempt} of ${j.maxAttempts}`],
    ["priority", String(j.priority)],
    ["run at", time(j.runAt)],
    ["created", time(j.createdAt)],
    ["updated", time(j.updatedAt)],
    ["started", time(j.startedAt)],
    ["finished", time(j.finishedAt)],
    ["runtime", runtimeText(attemptRuntime(j, Date.now()))],
    ["concurrency key", j.concurrencyKey ?? "-"],
    ["idempotency key", j.idempotencyKey ?? "-"],
    ["rate key", j.rateKey ?? "-"],
    ["fairness key", j.fairKey ?? "-"],
    ["debounce key", j.debounceKey ?? "-"],
    ["worker", j.worker ?? "-"],
    ["lease expires", time(j.leaseExpiresAt)],
    ["last error", j.lastError ?? "-"],
    ...j.errors.map((e): [string, string] => [`attempt ${e.attempt} failed`, `${time(e.at)} on ${e.worker ?? "-"}: ${e.error.split("\n")[0]}`]),
    ["payload", JSON.stringify(j.payload)],
    ["result", JSON.stringify(j.result)],
    ["progress", JSON.stringify(j.progress)],
    ...j.steps.map((s): [string, string] => [`step ${s.name}`, `${time(s.at)}: ${JSON.stringify(s.result)}`]),
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  const indent = "\n" + " ".repeat(w + 2);
  return rows.map(([k, v]) => `${k.padEnd(w)}  ${k === "last error" ? printable(v).replace(/\n/g, indent) : oneLine(v)}`).join("\n");
}

export function statsText(s: DocketStats): string {
  const out: string[] = [];
  out.push(
    s.queues.length === 0
      ? "queues: none"
      : table(
          ["queue", "waiting", "ready", "scheduled", "blocked", "running", `succeeded ${age(s.windowMs)}`, "dead", `cancelled ${age(s.windowMs)}`, "oldest ready", "paused", "cap"],
          s.queues.map((q) => [
            q.queue,
            q.counts.waiting,
            q.counts.ready,
            q.counts.scheduled,
            q.counts.blocked,
            q.counts.running,
            q.counts.succeeded,
            q.counts.dead,
            q.counts.cancelled,
            q.counts.ready > 0 ? age(q.oldestReadyAgeMs) : "-",
            q.paused ? "yes" : "no",
            q.maxRunning ?? "-",
          ]),
        ),
  );
  if (s.tasks.some((t) => t.maxRunning !== null)) {
    out.push("", table(["task", "running", "cap"], s.tasks.filter((t) => t.maxRunning !== null).map((t) => [t.task, t.counts.running, t.maxRunning ?? "-"])));
  }
  if (s.keys.length > 0) out.push("", table(["key", "limit", "in use", "blocked"], s.keys.map((k) => [k.key, k.limit ?? "-", k.holders, k.blocked])));
  if (s.rateLimits.length > 0) {
    out.push(
      "",
      table(
        ["rate limit", "limit", "per", "started in window", "waiting", "next start"],
        s.rateLimits.map((r) => [`${r.scope} ${r.name}`, r.limit, age(r.periodMs), r.used, r.waiting, r.nextStartAt === null ? "now" : `in ${age(r.nextStartAt - s.at)}`]),
      ),
    );
  }
  if (s.running.length > 0) {
    out.push("", table(["running id", "task", "queue", "attempt", "worker", "lease expires in"], s.running.map((r) => [r.id, r.task, r.queue, r.attempt, r.worker ?? "-", r.leaseExpiresInMs < 0 ? `expired ${age(-r.leaseExpiresInMs)} ago` : age(r.leaseExpiresInMs)])));
  }
  const done = s.throughput.reduce((n, b) => n + b.succeeded, 0);
  const dead = s.throughput.reduce((n, b) => n + b.dead, 0);
  out.push("", `last ${age(s.windowMs)}: ${done} succeeded, ${dead} dead`);
  return out.join("\n");
}

/** A transaction open this long is named by `healthText`. */
export const OLD_TRANSACTION_MS = 60_000;

/**
 * The warnings `docket.health()` gives cause for, one line each, for
 * `docket status`: autovacuum that does not run for docket's tables, and a
 * transaction open for OLD_TRANSACTION_MS or more (both keep dead rows
 * that claims then step over). Empty when there is none, or no reading.
 */
export function healthText(h: StoreHealth | null): string[] {
  if (h === null) return [];
  const lines: string[] = [];
  if (h.autovacuum === false) lines.push("warning: autovacuum does not run for docket's tables: their dead rows pile up until VACUUM, and claims slow down");
  if (h.oldestTransactionAgeMs === null) lines.push("note: the oldest open transaction cannot be read with this role (MariaDB: it needs the PROCESS privilege)");
  else if (h.oldestTransactionAgeMs >= OLD_TRANSACTION_MS) lines.push(`warning: a transaction has been open for ${age(h.oldestTransactionAgeMs)}: dead rows it can still see are kept, and claims slow down`);
  return lines;
}
