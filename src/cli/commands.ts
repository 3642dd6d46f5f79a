import { Docket } from "../client/docket.ts";
import { BULK_ACTIONS, bulkRefusal, type BulkAction } from "../core/bulk.ts";
import { isJobState, JOB_STATES } from "../core/states.ts";
import { healthText, jobDetail, jobsTable, statsText, table, time } from "./format.ts";
import { Progress } from "./progress.ts";
import { UsageError, durationText, parseCount, parseDuration, parseId } from "./usage.ts";

export interface Flags {
  json: boolean;
  state?: string;
  queue?: string;
  task?: string;
  key?: string;
  /** `jobs list`: only jobs whose last error contains this text (list's errorContains). */
  error?: string;
  /** `jobs bulk`: the count confirmed (what --dry-run printed). */
  expect?: string;
  limit?: string;
  after?: string;
  window?: string;
  olderThan?: string;
  /** dlq purge: no filter, every dead job. */
  all?: boolean;
  /** dlq purge, dlq replay-all: count what would change, change nothing. */
  dryRun?: boolean;
}

/** What a command prints: text for people, a value for --json. */
export interface Output {
  text: string;
  json: unknown;
}

const BATCH = 1_000;

/** How many positionals each command of two words takes at most (one-word commands take none: a second word is an unknown command). */
const ARGUMENTS: Record<string, number> = {
  "jobs list": 0, "jobs show": 1, "jobs cancel": 1, "jobs retry": 1, "jobs bulk": 1, "jobs delete": 1,
  "dlq list": 0, "dlq replay": 1, "dlq replay-all": 0, "dlq purge": 0,
  "queues list": 0, "queues pause": 1, "queues resume": 1, "queues cap": 2, "queues rate": 2, "tasks cap": 2, "tasks rate": 2,
  "schedules list": 0, "schedules pause": 1, "schedules resume": 1, "schedules run": 1, "workers list": 0,
};

/** Runs one command (positionals after the command name in `args`) on `docket`. Throws UsageError for a malformed command. */
export async function runCommand(docket: Docket, command: string[], flags: Flags): Promise<Output> {
  const [group, action, ...args] = command;
  const filter = { ...(flags.queue === undefined ? {} : { queue: flags.queue }), ...(flags.task === undefined ? {} : { task: flags.task }) };
  const name = `${group} ${action ?? ""}`.trim();
  // Ignoring --dry-run would do for real what was asked for as a rehearsal.
  if (flags.dryRun && name !== "dlq purge" && name !== "dlq replay-all" && name !== "jobs bulk") throw new UsageError("--dry-run is supported by dlq purge, dlq replay-all and jobs bulk only");
  if (flags.all && name !== "dlq purge") throw new UsageError("--all is an option of dlq purge only");
  if (flags.error !== undefined && name !== "jobs list") throw new UsageError("--error is an option of jobs list only");
  const most = ARGUMENTS[name];
  if (most !== undefined && args.length > most) throw new UsageError(`${name} takes ${most === 0 ? "no argument" : most === 1 ? "one argument" : `${most} arguments`}, got ${args.length}: ${args.map((a) => JSON.stringify(a)).join(" ")}`);
  switch (name) {
    case "migrate": {
      const r = await docket.migrate();
      return { text: r.applied.length === 0 ? `schema is at version ${r.version}; nothing to apply` : `applied ${r.applied.join(", ")}; schema is at version ${r.version}`, json: r };
    }
    case "status": {
      const windowMs = flags.window === undefined ? undefined : parseDuration(flags.window, "--window");
      if (windowMs !== undefined && (windowMs < 60_000 || windowMs > 31 * 86_400_000)) throw new UsageError(`--window must be between 1m and 31d, got ${JSON.stringify(flags.window)}`);
      const s = await docket.stats(windowMs === undefined ? {} : { windowMs });
      // The warnings are text only: --json prints the stats as before (health() is the API for them). A health
      // reading that fails is a line of its own: the stats are still shown.
      const warnings = await docket.health().then(
        (h) => healthText(h),
        (error: unknown) => [`note: health() could not be read: ${(error as Error).message}`],
      );
      return { text: [statsText(s), ...(warnings.length > 0 ? ["", ...warnings] : [])].join("\n"), json: s };
    }
    case "jobs list": {
      if (flags.state !== undefined && !isJobState(flags.state)) throw new UsageError(`--state must be one of ${JOB_STATES.join(", ")}`);
      const jobs = await docket.list({
        ...filter,
        ...(flags.state === undefined ? {} : { state: flags.state }),
        ...(flags.key === undefined ? {} : { concurrencyKey: flags.key }),
        ...(flags.error === undefined ? {} : { errorContains: flags.error }),
        limit: parseCount(flags.limit, "--limit", 50),
        ...(flags.after === undefined ? {} : { afterId: parseId(flags.after) }),
      });
      return { text: jobsTable(jobs), json: jobs };
    }
    case "jobs show": {
      const job = await docket.get(parseId(args[0]));
      if (!job) return refused(`no job ${args[0]}`);
      return { text: jobDetail(job), json: job };
    }
    case "jobs cancel": {
      const job = await docket.cancel(parseId(args[0]));
      return { text: `cancelled job ${job.id} (${job.task})`, json: job };
    }
    case "jobs retry": {
      // A dead job is replayed (a fresh attempt budget); a scheduled one (delayed, or in a retry's backoff) is made due now.
      const id = parseId(args[0]);
      const current = await docket.get(id);
      if (!current) return refused(`no job ${id}`);
      const job = current.state === "dead" ? await docket.deadLetters.replay(id) : await docket.runNow(id);
      return { text: `${current.state === "dead" ? "replayed" : "made due now"}: job ${job.id} (${job.task})`, json: job };
    }
    case "jobs bulk": {
      const act = required(args[0], "a bulk action (cancel, delete, run-now, replay)");
      if (!Object.hasOwn(BULK_ACTIONS, act)) throw new UsageError(`a bulk action is one of ${Object.keys(BULK_ACTIONS).join(", ")}, got ${JSON.stringify(act)}`);
      if (flags.state === undefined) throw new UsageError("jobs bulk needs --state (what the action means depends on it)");
      if (!isJobState(flags.state)) throw new UsageError(`--state must be one of ${JOB_STATES.join(", ")}`);
      // Refused before counting: a dry run must not offer a count that --expect would then refuse.
      const refusal = bulkRefusal(act as BulkAction, flags.state);
      if (refusal !== null) return refused(refusal);
      const selection = { state: flags.state, ...filter, ...(flags.key === undefined ? {} : { concurrencyKey: flags.key }) };
      const count = await docket.bulk.count(selection);
      if (flags.dryRun || flags.expect === undefined) {
        if (!flags.dryRun) throw new UsageError(`jobs bulk changes ${count} job(s) now: run it with --dry-run to see the count, then with --expect <count> to do it`);
        return { text: `would ${act} ${count} job(s); dry run, nothing changed (to do it: --expect ${count})`, json: { dryRun: true, wouldChange: count } };
      }
      const expected = parseCount(flags.expect, "--expect", 0);
      const r = await docket.bulk.apply(act as BulkAction, selection, { limit: expected });
      return { text: `${act}: ${r.applied} job(s) done${r.skipped > 0 ? `, ${r.skipped} skipped (they had moved on)` : ""}${count > expected ? `; ${count - expected} more match now, beyond the ${expected} expected` : ""}`, json: { ...r, matchedNow: count } };
    }
    case "jobs delete": {
      const id = parseId(args[0]);
      await docket.deleteJob(id);
      return { text: `deleted job ${id}`, json: { deleted: id } };
    }
    case "dlq list": {
      const jobs = await docket.deadLetters.list({ ...filter, limit: parseCount(flags.limit, "--limit", 50) });
      return { text: jobsTable(jobs), json: jobs };
    }
    case "dlq replay": {
      const job = await docket.deadLetters.replay(parseId(args[0]));
      return { text: `replayed job ${job.id} (${job.task}): ${job.state}`, json: job };
    }
    case "dlq replay-all": {
      const limit = flags.limit === undefined ? Number.MAX_SAFE_INTEGER : parseCount(flags.limit, "--limit", 0);
      if (flags.dryRun) {
        const n = await countDead(docket, filter, docket.clock.now(), limit);
        return { text: `would replay ${n} dead job(s); dry run, nothing replayed`, json: { dryRun: true, wouldReplay: n } };
      }
      const total = Math.min(limit, await deadCount(docket, filter));
      const replayed = await inBatches("replaying", total, flags, async (ask) => (await docket.deadLetters.replayAll({ ...filter, limit: ask })).replayed, limit);
      return { text: `replayed ${replayed} dead job(s)`, json: { replayed } };
    }
    case "dlq purge": {
      const filtered = flags.queue !== undefined || flags.task !== undefined || flags.olderThan !== undefined;
      if (flags.all && filtered) throw new UsageError("dlq purge: --all means every dead job; drop it to delete only what --queue, --task or --older-than select");
      if (!flags.all && !filtered && !flags.dryRun) {
        throw new UsageError("dlq purge with no --queue, --task or --older-than deletes every dead job: add --all to confirm (--dry-run counts them)");
      }
      const olderThanMs = flags.olderThan === undefined ? 0 : parseDuration(flags.olderThan, "--older-than");
      if (flags.dryRun) {
        const n = await countDead(docket, filter, docket.clock.now() - olderThanMs);
        return { text: `would delete ${n} dead job(s); dry run, nothing deleted`, json: { dryRun: true, wouldDelete: n } };
      }
      const total = await deadCount(docket, filter);
      const deleted = await inBatches("deleting", total, flags, async (ask) => (await docket.deadLetters.purge({ ...filter, olderThanMs, limit: ask })).deleted);
      return { text: `deleted ${deleted} dead job(s)`, json: { deleted } };
    }
    case "queues list": {
      const { queues, tasks } = await docket.listControls();
      const text = [
        queues.length === 0 ? "no queue controls" : table(["queue", "paused", "cap", "rate limit"], queues.map((q) => [q.queue, q.paused ? "yes" : "no", q.maxRunning ?? "-", rateText(q.rateLimit)])),
        ...(tasks.length === 0 ? [] : ["", table(["task", "cap", "rate limit"], tasks.map((t) => [t.task, t.maxRunning ?? "-", rateText(t.rateLimit)]))]),
      ].join("\n");
      return { text, json: { queues, tasks } };
    }
    case "queues pause":
    case "queues resume": {
      const queue = required(args[0], "a queue name");
      const c = action === "pause" ? await docket.pauseQueue(queue) : await docket.resumeQueue(queue);
      return { text: `queue ${c.queue} ${c.paused ? "paused" : "resumed"}`, json: c };
    }
    case "queues cap":
    case "tasks cap": {
      const name = required(args[0], group === "queues" ? "a queue name" : "a task name");
      const cap = capOf(required(args[1], "a cap (a number, or none)"));
      const c = group === "queues" ? await docket.setQueueCap(name, cap) : await docket.setTaskCap(name, cap);
      return { text: `${group === "queues" ? "queue" : "task"} ${name}: cap ${c.maxRunning ?? "none"}`, json: c };
    }
    case "queues rate":
    case "tasks rate": {
      const name = required(args[0], group === "queues" ? "a queue name" : "a task name");
      const limit = rateOf(required(args[1], "a rate limit (<n>/<duration>, e.g. 100/1m, or none)"));
      const c = group === "queues" ? await docket.setQueueRateLimit(name, limit) : await docket.setTaskRateLimit(name, limit);
      return { text: `${group === "queues" ? "queue" : "task"} ${name}: rate limit ${rateText(c.rateLimit)}`, json: c };
    }
    case "purge": {
      if (flags.olderThan === undefined) throw new UsageError("purge needs --older-than <duration> (e.g. 7d)");
      const olderThanMs = parseDuration(flags.olderThan, "--older-than");
      const purger = new Docket({ adapter: docket.adapter, retention: { finishedMs: olderThanMs, deadMs: olderThanMs } });
      // No total: stats count succeeded and cancelled jobs over a recent window only, and these are the old ones.
      const deleted = await inBatches("deleting", null, flags, async (ask) => (await purger.purgeFinished({ limit: ask })).deleted);
      return { text: `deleted ${deleted} finished job(s) older than ${flags.olderThan}`, json: { deleted } };
    }
    case "schedules list": {
      const list = await docket.schedules.list();
      const text =
        list.length === 0
          ? "no schedules"
          : table(
              ["name", "cron", "timezone", "task", "queue", "last tick", "next tick", "missed"],
              list.map((x) => [x.name, x.cron, x.timezone, x.task, x.queue, time(x.lastTickAt), x.paused ? "paused" : time(x.nextTickAt), x.missedTicks === 0 ? "none" : `${x.missedTicks} since ${time(x.firstMissedAt)}`]),
            );
      return { text, json: list };
    }
    case "workers list": {
      const list = await docket.workers();
      const now = Date.now();
      const text =
        list.length === 0
          ? "no worker is running"
          : table(
              ["name", "host", "pid", "queues", "concurrency", "in hand", "last heartbeat"],
              list.map((w) => [w.name, w.host, w.pid, w.queues.join(","), w.concurrency, w.jobsInHand, `${Math.round((now - w.heartbeatAt) / 1000)} s ago`]),
            );
      return { text, json: list };
    }
    case "schedules pause":
    case "schedules resume": {
      const name = required(args[0], "a schedule name");
      const s = action === "pause" ? await docket.schedules.pause(name) : await docket.schedules.resume(name);
      // A paused schedule fires no tick: its stored next tick is not one.
      return { text: s.paused ? `schedule ${s.name} paused; no tick fires until it is resumed` : `schedule ${s.name} resumed; next tick ${time(s.nextTickAt)}`, json: s };
    }
    case "schedules run": {
      const job = await docket.schedules.runNow(required(args[0], "a schedule name"));
      return { text: `enqueued job ${job.id} (${job.task}) from schedule ${args[0]}`, json: job };
    }
    default:
      throw new UsageError(group === undefined ? "a command is required" : `unknown command: ${command.join(" ")}`);
  }
}

/** A refusal the CLI reports with exit code 1, like a DocketError. */
export class Refused extends Error {
  override readonly name = "Refused";
}

function refused(message: string): never {
  throw new Refused(message);
}

function required(value: string | undefined, what: string): string {
  if (value === undefined) throw new UsageError(`${what} is required`);
  return value;
}

/** `100/1m` (at most 100 starts per minute), or `none`. */
function rateOf(text: string): { limit: number; periodMs: number } | null {
  if (text === "none") return null;
  const m = /^(\d+)\/(.+)$/.exec(text);
  // The form only: a limit or period out of range is the API's InvalidArgumentError (refused, exit 1).
  if (!m) throw new UsageError(`a rate limit is <n>/<duration> (e.g. 100/1m) or none, got ${JSON.stringify(text)}`);
  return { limit: Number(m[1]), periodMs: parseDuration(m[2]!, "the rate limit's period") };
}

/** A rate limit in the form `queues rate` and `tasks rate` take (`100/1m`), or `-`. */
function rateText(limit: { limit: number; periodMs: number } | null): string {
  return limit === null ? "-" : `${limit.limit}/${durationText(limit.periodMs)}`;
}

function capOf(text: string): number | null {
  if (text === "none") return null;
  if (!/^\d+$/.test(text)) throw new UsageError(`a cap is a positive integer or none, got ${JSON.stringify(text)}`);
  return Number(text);
}

/**
 * Runs `step` (asked to do at most BATCH items, fewer near `limit`; returns
 * how many it did) until a step does fewer than asked or `limit` is
 * reached, with a progress bar on a terminal (not under --json). Returns
 * how many were done.
 */
async function inBatches(label: string, total: number | null, flags: Flags, step: (ask: number) => Promise<number>, limit = Number.MAX_SAFE_INTEGER): Promise<number> {
  const bar = new Progress(label, total, !flags.json && Boolean(process.stderr.isTTY));
  let done = 0;
  while (done < limit) {
    const ask = Math.min(BATCH, limit - done);
    const n = await step(ask);
    done += n;
    bar.update(done);
    if (n < ask) break;
  }
  bar.done();
  return done;
}

/**
 * How many dead jobs of `filter` died at or before `diedBefore`, at most
 * `limit`: reads the dead-letter list a page of BATCH jobs at a time.
 */
async function countDead(docket: Docket, filter: { queue?: string; task?: string }, diedBefore: number, limit = Number.MAX_SAFE_INTEGER): Promise<number> {
  let n = 0;
  let afterId: number | undefined;
  for (;;) {
    const page = await docket.deadLetters.list({ ...filter, limit: BATCH, ...(afterId === undefined ? {} : { afterId }) });
    n += page.filter((j) => j.finishedAt !== null && j.finishedAt <= diedBefore).length;
    if (n >= limit) return limit;
    if (page.length < BATCH) return n;
    afterId = page[page.length - 1]!.id;
  }
}

async function deadCount(docket: Docket, filter: { queue?: string; task?: string }): Promise<number> {
  const s = await docket.stats();
  if (filter.task !== undefined) return s.tasks.find((t) => t.task === filter.task)?.counts.dead ?? 0;
  return s.queues.filter((q) => filter.queue === undefined || q.queue === filter.queue).reduce((n, q) => n + q.counts.dead, 0);
}
