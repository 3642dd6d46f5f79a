import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sqliteAdapter } from "../../src/adapters/sqlite/index.ts";
import { openUrl } from "../../src/cli/open.ts";
import { OLD_TRANSACTION_MS, healthText, jobDetail } from "../../src/cli/format.ts";
import { Docket } from "../../src/client/docket.ts";
import { AdapterError } from "../../src/core/errors.ts";
import { BIN, NODE, runCli } from "../support/cli.ts";
import { PG_URL, createMysqlTestDatabase, createPgTestDatabase, dropMysqlDatabase, dropPgDatabase } from "../support/targets.ts";

/** Runs `docket …` as a user would (a child process), with --url. */
const docket = runCli;

const pgDb = await createPgTestDatabase("docket_cli", "the CLI on PostgreSQL");
const mysqlDb = await createMysqlTestDatabase("docket_cli", "the CLI on MariaDB");
const dir = mkdtempSync(join(tmpdir(), "docket-cli-"));
afterAll(async () => {
  if (pgDb) await dropPgDatabase(PG_URL, pgDb.database);
  if (mysqlDb) await dropMysqlDatabase(mysqlDb.database);
  rmSync(dir, { recursive: true, force: true });
});

/** The `docket` command, on every adapter. */
describe("cli", () => {
  const cases: [string, string | null][] = [
    ["sqlite", `sqlite:${join(dir, "cli.db")}`],
    ["postgres", pgDb?.url ?? null],
    ["mysql", mysqlDb?.url ?? null],
  ];
  for (const [adapter, url] of cases) {
    it.concurrent.skipIf(url === null)(`a session on ${adapter}: migrate, status, jobs, dead letters, queues, purge; exit codes 0, 1, 2`, async () => {
      const transcript: string[] = [];
      const run = async (...args: string[]) => {
        const r = await docket(url!, ...args);
        transcript.push(`$ docket ${args.join(" ")}`, ...(r.stdout.trim() ? [r.stdout.trimEnd()] : []), ...(r.stderr.trim() ? [r.stderr.trimEnd()] : []), `(exit ${r.code})`);
        return r;
      };
      expect((await run("migrate")).stdout).toMatch(/schema is at version \d+/);
      const d = new Docket({ adapter: await openUrl(url!, undefined) });
      let ids: { mail: number; dead: number; keyed: number; later: number };
      try {
        const mail = await d.enqueue("mail", { to: "<script>alert(1)</script>" }, { queue: "email" });
        await d.enqueue("mail", {}, { queue: "email" });
        const keyed = await d.enqueue("sync", {}, { queue: "sync", concurrency: { key: "account-7", limit: 1 } });
        await d.enqueue("sync", {}, { queue: "sync", concurrency: { key: "account-7", limit: 1 } });
        const later = await d.enqueue("mail", {}, { queue: "later", delay: 3_600_000 });
        const dead = await d.enqueue("charge", { cents: 100 }, { queue: "billing", maxAttempts: 1 });
        const w = d.worker({ name: "billing-1", queues: ["billing"], pollMs: 20, logger: null, handlers: { charge: () => Promise.reject(new Error("card declined")) } });
        await w.start();
        await d.waitFor(dead.id, { timeoutMs: 20_000, pollMs: 20 });
        await w.stop();
        await d.schedules.put("nightly-report", { cron: "0 3 * * *", timezone: "Europe/Berlin", task: "report" });
        ids = { mail: mail.id, dead: dead.id, keyed: keyed.id, later: later.id };
      } finally {
        await d.close();
      }

      const status = await run("status", "--json");
      expect(status.code).toBe(0);
      const stats = JSON.parse(status.stdout);
      const q = (name: string) => stats.queues.find((x: { queue: string }) => x.queue === name).counts;
      expect(q("email").ready).toBe(2);
      expect(q("sync")).toMatchObject({ ready: 1, blocked: 1 });
      expect(q("billing").dead).toBe(1);
      expect(stats.keys).toEqual([{ key: "account-7", limit: 1, holders: 1, running: 0, blocked: 1 }]);
      const statusText = (await run("status")).stdout;
      expect(statusText).toMatch(/email\s+0\s+2\s+0\s+0\s+0/);
      // The health warnings as the store reads: PostgreSQL's autovacuum may be off on the server the tests use.
      const probe = new Docket({ adapter: await openUrl(url!, undefined) });
      const health = await probe.health().finally(() => probe.close());
      expect(statusText.includes("warning: autovacuum does not run for docket's tables")).toBe(health?.autovacuum === false);

      const listed = await run("jobs", "list", "--queue", "email");
      expect(listed.stdout).toContain(String(ids.mail));
      expect((await run("jobs", "show", String(ids.mail))).stdout).toContain('"to":"<script>alert(1)</script>"');
      expect((await run("jobs", "cancel", String(ids.keyed))).stdout).toContain(`cancelled job ${ids.keyed}`);
      const again = await run("jobs", "cancel", String(ids.keyed));
      expect(again.code).toBe(1);
      expect(again.stderr).toMatch(/cancelled/);
      expect((await run("jobs", "show", "999999")).code).toBe(1);
      expect(JSON.parse((await run("jobs", "list", "--key", "account-7", "--json")).stdout).map((j: { state: string }) => j.state)).toEqual(["cancelled", "ready"]);

      expect((await run("dlq", "list")).stdout).toContain("card declined");
      const byError = (text: string) => run("jobs", "list", "--state", "dead", "--error", text, "--json").then((r) => JSON.parse(r.stdout).map((j: { id: number }) => j.id));
      expect(await byError("card declined")).toEqual([ids.dead]);
      expect(await byError("Card declined")).toEqual([]);
      expect((await run("jobs", "cancel", "1", "--error", "x")).code).toBe(2);
      const deadJob = (await run("jobs", "show", String(ids.dead))).stdout;
      expect(deadJob).toMatch(/worker\s+billing-1/);
      expect(deadJob).toMatch(/attempt 1 failed\s+\S+ on billing-1: Error: card declined/);
      expect((await run("dlq", "replay", String(ids.dead))).stdout).toContain(`replayed job ${ids.dead}`);
      expect((await run("dlq", "replay", String(ids.dead))).code).toBe(1);
      expect((await run("dlq", "replay-all", "--json")).stdout).toContain('"replayed": 0');
      expect((await run("jobs", "retry", String(ids.later))).stdout).toBe(`made due now: job ${ids.later} (mail)\n`);
      expect(JSON.parse((await run("jobs", "show", String(ids.later), "--json")).stdout).runAt).toBeLessThanOrEqual(Date.now());
      const notFinished = await run("jobs", "delete", String(ids.later));
      expect([notFinished.code, notFinished.stderr]).toEqual([1, expect.stringMatching(/cannot delete job \d+: it is scheduled/)]);
      expect((await run("jobs", "cancel", String(ids.later))).code).toBe(0);
      expect((await run("jobs", "delete", String(ids.later))).stdout).toBe(`deleted job ${ids.later}\n`);
      expect((await run("jobs", "show", String(ids.later))).code).toBe(1);
      expect((await run("jobs", "retry", String(ids.mail))).code).toBe(1);
      expect((await run("jobs", "bulk", "run-now", "--state", "scheduled", "--queue", "nothing-here", "--dry-run")).stdout).toBe("would run-now 0 job(s); dry run, nothing changed (to do it: --expect 0)\n");
      const unconfirmed = await run("jobs", "bulk", "cancel", "--state", "ready", "--queue", "email");
      expect([unconfirmed.code, unconfirmed.stderr]).toEqual([2, expect.stringContaining("jobs bulk changes 2 job(s) now")]);
      expect((await run("jobs", "bulk", "cancel", "--state", "ready", "--queue", "email", "--dry-run")).stdout).toBe("would cancel 2 job(s); dry run, nothing changed (to do it: --expect 2)\n");
      expect((await run("jobs", "bulk", "cancel", "--state", "ready", "--queue", "email", "--expect", "1")).stdout).toBe("cancel: 1 job(s) done; 1 more match now, beyond the 1 expected\n");
      // An action the state does not allow is refused before any count, with --dry-run too (a count --expect would refuse).
      for (const confirm of [[], ["--dry-run"], ["--expect", "1"]]) {
        const wrong = await run("jobs", "bulk", "delete", "--state", "ready", ...confirm);
        expect([wrong.code, wrong.stdout, wrong.stderr]).toEqual([1, "", "docket: delete applies to succeeded, dead, cancelled jobs, not ready\n"]);
      }

      expect((await run("queues", "pause", "email")).stdout).toBe("queue email paused\n");
      expect((await run("queues", "cap", "email", "2")).stdout).toBe("queue email: cap 2\n");
      expect(JSON.parse((await run("queues", "list", "--json")).stdout).queues).toEqual([{ queue: "email", paused: true, maxRunning: 2, rateLimit: null }]);
      expect((await run("queues", "resume", "email")).stdout).toBe("queue email resumed\n");
      // Out of range is refused (exit 1) with the API's message; a malformed value is a usage error (exit 2).
      for (const args of [["queues", "rate", "email", "0/1s"], ["queues", "rate", "email", "5/0s"], ["queues", "cap", "email", "0"], ["tasks", "rate", "report", "0/1m"]]) {
        const refused = await run(...args);
        expect([args, refused.code, refused.stderr]).toEqual([args, 1, expect.stringMatching(/must be an integer in \[1, /)]);
      }
      expect((await run("queues", "rate", "email", "fast")).code).toBe(2);
      // A limit is shown in the form the command takes: it reads back as given.
      expect((await run("queues", "rate", "email", "3/1s")).stdout).toContain("3/1s");
      expect((await run("queues", "rate", "email", "90/90s")).stdout).toContain("90/90s");
      expect((await run("queues", "list")).stdout).toMatch(/email .*90\/90s/);
      expect((await run("queues", "rate", "email", "none")).code).toBe(0);
      expect((await run("schedules", "list")).stdout).toMatch(/nightly-report\s+0 3 \* \* \*\s+Europe\/Berlin\s+report/);
      expect((await run("schedules", "run", "nightly-report")).stdout).toMatch(/^enqueued job \d+ \(report\) from schedule nightly-report\n$/);
      expect((await run("schedules", "run", "nope")).code).toBe(1);
      expect((await run("schedules", "pause", "nightly-report")).stdout).toBe("schedule nightly-report paused; no tick fires until it is resumed\n");
      expect((await run("schedules", "list")).stdout).toMatch(/nightly-report .* paused /);
      expect((await run("schedules", "resume", "nightly-report")).stdout).toMatch(/^schedule nightly-report resumed; next tick \d{4}-/);
      expect((await run("workers", "list")).stdout).toBe("no worker is running\n");
      expect((await run("purge", "--older-than", "0ms")).stdout).toMatch(/deleted 2 finished job\(s\)/);

      expect((await run("jobs", "show", "abc")).code).toBe(2);
      const extra = await run("jobs", "show", "1", "extra");
      expect([extra.code, extra.stderr]).toEqual([2, expect.stringContaining('jobs show takes one argument, got 2: "1" "extra"')]);
      const window = await run("status", "--window", "30s");
      expect([window.code, window.stderr]).toEqual([2, expect.stringContaining("--window must be between 1m and 31d")]);
      expect((await run("jobs", "frobnicate")).code).toBe(2);
      expect((await run("purge")).code).toBe(2);
      expect((await run("status", "--bogus")).code).toBe(2);
      expect((await docket(null, "status")).code).toBe(2);
      console.log(`--- docket CLI on ${adapter} ---\n${transcript.join("\n")}`);
      // 60 CLI runs, each a new tsx process: 87-107 s for one adapter alone on a slow 2-core machine, and the three run at once.
    }, 420_000);
  }
  it("docket dashboard serves the dashboard until SIGINT, then exits 0", async () => {
    const url = `sqlite:${join(dir, "dashboard.db")}`;
    expect((await docket(url, "migrate")).code).toBe(0);
    const child = spawn(NODE, [BIN, "dashboard", "--port", "0", "--url", url], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, DOCKET_DASHBOARD_TOKEN: "cli-test-token" } });
    const served = await new Promise<string>((resolve, reject) => {
      let out = "";
      child.stdout.on("data", (d) => {
        out += d;
        const m = /dashboard on (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out);
        if (m) resolve(m[1]!);
      });
      child.on("exit", (code) => reject(new Error(`exited ${code} before serving`)));
    });
    const page = await fetch(served, { headers: { authorization: "Bearer cli-test-token" } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("<title>Overview · docket</title>");
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    child.kill("SIGINT");
    expect(await exited).toBe(0);
  }, 60_000);
  it("a database it cannot reach is exit code 3", async () => {
    const r = await docket("postgres://postgres@127.0.0.1:1/none", "status");
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/ECONNREFUSED/);
  });
});

/**
 * Makes one job per item dead (maxAttempts 1, a handler that throws
 * `error`) on the docket under `prefix`; returns their ids.
 */
async function seedDead(url: string, prefix: string, items: { task: string; queue: string; error: string; options?: Record<string, unknown>; payload?: unknown }[]): Promise<number[]> {
  const d = new Docket({ adapter: await openUrl(url, prefix) });
  try {
    const ids: number[] = [];
    for (const item of items) ids.push((await d.enqueue(item.task, item.payload ?? {}, { queue: item.queue, maxAttempts: 1, ...item.options })).id);
    const handlers = Object.fromEntries(items.map((item) => [item.task, () => Promise.reject(new Error(item.error))]));
    const w = d.worker({ name: "seed", queues: [...new Set(items.map((i) => i.queue))], pollMs: 20, logger: null, handlers });
    await w.start();
    for (const id of ids) await d.waitFor(id, { timeoutMs: 20_000, pollMs: 20 });
    await w.stop();
    return ids;
  } finally {
    await d.close();
  }
}

describe("cli: what it prints and what it touches", () => {
  const cases: [string, string | null][] = [
    ["sqlite", `sqlite:${join(dir, "safety.db")}`],
    ["postgres", pgDb?.url ?? null],
    ["mysql", mysqlDb?.url ?? null],
  ];
  // Anything a terminal acts on: C0 but the newline, DEL, C1, bidi overrides and isolates.
  const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;
  const TITLE = "\u001b]0;pwned\u0007\u001b[31m";
  for (const [adapter, url] of cases) {
    it.concurrent.skipIf(url === null)(`on ${adapter}, escape sequences in task and queue names, keys, errors and payloads are printed escaped, in text and in --json`, async () => {
      const prefix = "esc_";
      const run = (...args: string[]) => docket(url!, ...args, "--prefix", prefix);
      expect((await run("migrate")).code).toBe(0);
      const queue = "q\u009b2J\u202e";
      const [deadId] = await seedDead(url!, prefix, [
        { task: TITLE, queue, error: "boom \u001b]0;pwned\u0007\nsecond line \u001b[2J\u009b", payload: { x: "\u001b[31m\u009b\u202e\u007f" }, options: { idempotencyKey: "k\u001b[2J" } },
      ]);
      const d = new Docket({ adapter: await openUrl(url!, prefix) });
      let readyId: number;
      try {
        readyId = (await d.enqueue(TITLE, {}, { queue, concurrency: { key: "key\u001b[5m", limit: 1 } })).id;
        await d.setTaskCap(TITLE, 5);
        await d.pauseQueue(queue);
      } finally {
        await d.close();
      }
      const printed: Record<string, string> = {};
      for (const args of [["status"], ["jobs", "list"], ["jobs", "show", String(deadId)], ["dlq", "list"], ["queues", "list"], ["jobs", "cancel", String(readyId)]]) {
        const r = await run(...args);
        expect(r.code, `docket ${args.join(" ")}: ${r.stderr}`).toBe(0);
        expect(r.stdout, `docket ${args.join(" ")}`).not.toMatch(RAW);
        printed[args.join(" ")] = r.stdout;
      }
      expect(printed["jobs show " + deadId]).toMatch(/^task +\\x1b\]0;pwned\\x07\\x1b\[31m$/m);
      expect(printed["jobs show " + deadId]).toMatch(/^idempotency key +k\\x1b\[2J$/m);
      expect(printed["jobs list"]).toContain("q\\u009b2J\\u202e");
      expect(printed["dlq list"]).toContain("Error: boom \\x1b]0;pwned\\x07");
      expect(printed.status).toContain("key\\x1b[5m");
      for (const args of [["status", "--json"], ["jobs", "show", String(deadId), "--json"], ["dlq", "list", "--json"]]) {
        const r = await run(...args);
        expect(r.code).toBe(0);
        expect(r.stdout, `docket ${args.join(" ")}`).not.toMatch(RAW);
      }
      const job = JSON.parse((await run("jobs", "show", String(deadId), "--json")).stdout);
      expect(job).toMatchObject({ task: TITLE, queue, idempotencyKey: "k\u001b[2J", payload: { x: "\u001b[31m\u009b\u202e\u007f" } });
    }, 180_000);

    it.concurrent.skipIf(url === null)(`on ${adapter}, dlq purge with no filter needs --all; --dry-run counts and deletes nothing`, async () => {
      const prefix = "dlq_";
      const run = (...args: string[]) => docket(url!, ...args, "--prefix", prefix);
      const dead = async () => (JSON.parse((await run("dlq", "list", "--json")).stdout) as unknown[]).length;
      expect((await run("migrate")).code).toBe(0);
      await seedDead(url!, prefix, [
        { task: "charge", queue: "billing", error: "declined" },
        { task: "charge", queue: "billing", error: "declined" },
        { task: "mail", queue: "email", error: "bounced" },
      ]);
      const bare = await run("dlq", "purge");
      expect(bare.code).toBe(2);
      expect(bare.stderr).toContain("--all");
      expect(await dead()).toBe(3);
      expect((await run("dlq", "purge", "--all", "--queue", "billing")).code).toBe(2);
      expect(await dead()).toBe(3);

      const dry = await run("dlq", "purge", "--dry-run");
      expect(dry.code).toBe(0);
      expect(dry.stdout).toBe("would delete 3 dead job(s); dry run, nothing deleted\n");
      expect(JSON.parse((await run("dlq", "purge", "--queue", "billing", "--dry-run", "--json")).stdout)).toEqual({ dryRun: true, wouldDelete: 2 });
      expect((await run("dlq", "purge", "--task", "mail", "--all", "--dry-run")).code).toBe(2);
      expect(JSON.parse((await run("dlq", "purge", "--older-than", "1d", "--dry-run", "--json")).stdout)).toEqual({ dryRun: true, wouldDelete: 0 });
      expect((await run("dlq", "replay-all", "--limit", "2", "--dry-run")).stdout).toBe("would replay 2 dead job(s); dry run, nothing replayed\n");
      expect((await run("purge", "--older-than", "0ms", "--dry-run")).code).toBe(2);
      expect(await dead()).toBe(3);

      expect((await run("dlq", "purge", "--all")).stdout).toBe("deleted 3 dead job(s)\n");
      expect(await dead()).toBe(0);
    }, 180_000);
  }

  it("a --url password is in no message: a wrong scheme, an unreachable or unknown host", async () => {
    const secret = "s3cret-Pa55";
    const urls: [string, number][] = [
      [`postgress://app:${secret}@db.example/jobs`, 2],
      [`mysql:/app:${secret}@db.example/jobs`, 2],
      [`postgres:app@db.example/jobs?password=${secret}`, 2],
      [`postgres://app@127.0.0.1:1/none?password=${secret}`, 3],
      [`postgres://postgres:${secret}@127.0.0.1:1/none`, 3],
      [`mysql://root:${secret}@127.0.0.1:1/none`, 3],
      [`postgres://postgres:${secret}@host.invalid/none`, 3],
    ];
    for (const [url, code] of urls) {
      const r = await docket(url, "status");
      expect(r.code, `${url}: ${r.stderr}`).toBe(code);
      expect(r.stderr).toMatch(/^docket: /);
      expect(r.stderr + r.stdout, url).not.toContain(secret);
    }
    expect((await docket(`postgress://app:${secret}@db.example/jobs`, "status")).stderr).toContain("got postgress://***@db.example/jobs");
  }, 120_000);

  it("on sqlite, only migrate creates the file: other commands on a missing file exit 3, name it, and create nothing", async () => {
    const sub = mkdtempSync(join(dir, "missing-"));
    const path = join(sub, "typo.db");
    for (const args of [["status"], ["jobs", "list"], ["dlq", "purge", "--all"], ["queues", "pause", "email"], ["dashboard", "--port", "0"]]) {
      const r = await docket(`sqlite:${path}`, ...args);
      expect(r.code, `docket ${args.join(" ")}: ${r.stderr}`).toBe(3);
      expect(r.stderr).toContain(`no SQLite database at ${path}; run docket migrate --url sqlite:${path} to create one`);
      expect(readdirSync(sub), `docket ${args.join(" ")}`).toEqual([]);
    }
    expect((await docket(`sqlite:${path}`, "migrate")).code).toBe(0);
    expect(existsSync(path)).toBe(true);
    expect((await docket(`sqlite:${path}`, "status")).code).toBe(0);
  }, 120_000);

  it("sqliteAdapter({ fileMustExist: true }) on a missing file fails with AdapterError naming it, and creates no file", async () => {
    const path = join(mkdtempSync(join(dir, "must-exist-")), "none.db");
    const adapter = sqliteAdapter({ filename: path, fileMustExist: true });
    await expect(adapter.migrate()).rejects.toThrow(AdapterError);
    await expect(adapter.migrate()).rejects.toThrow(`no database file at ${path}`);
    await adapter.close();
    expect(existsSync(path)).toBe(false);
  });
});

/** `docket status`'s health warnings (cli/format.ts healthText), from a reading. */
describe("healthText", () => {
  const quiet = { oldestTransactionAgeMs: 0, deadRows: [], purgeBacklog: null, autovacuum: true };
  it("names autovacuum that does not run and a transaction open a minute or more; nothing otherwise", () => {
    expect(healthText(null)).toEqual([]);
    expect(healthText(quiet)).toEqual([]);
    expect(healthText({ ...quiet, autovacuum: null, oldestTransactionAgeMs: OLD_TRANSACTION_MS - 1 })).toEqual([]);
    expect(healthText({ ...quiet, autovacuum: null, oldestTransactionAgeMs: null })).toEqual([expect.stringMatching(/^note: the oldest open transaction cannot be read with this role/)]);
    expect(healthText({ ...quiet, autovacuum: false })).toEqual(["warning: autovacuum does not run for docket's tables: their dead rows pile up until VACUUM, and claims slow down"]);
    const [line] = healthText({ ...quiet, oldestTransactionAgeMs: 12 * 60_000 });
    expect(line).toMatch(/^warning: a transaction has been open for 12 ?m/);
  });
});

describe("jobDetail", () => {
  it("indents every further line of the last error under its first, so an error cannot print a line that passes for a field", async () => {
    const d = new Docket({ adapter: sqliteAdapter({ filename: join(dir, "detail.db") }) });
    try {
      await d.migrate();
      const job = await d.enqueue("forge", {}, { maxAttempts: 1 });
      const w = d.worker({ pollMs: 10, logger: null, handlers: { forge: () => Promise.reject(new Error("ok\nstate             succeeded\n\u001b[2J")) } });
      await w.start();
      await d.waitFor(job.id, { timeoutMs: 10_000, pollMs: 10 });
      await w.stop();
      const lines = jobDetail((await d.get(job.id))!).split("\n");
      expect(lines.filter((l) => /^state /.test(l)).map((l) => l.replace(/ +/g, " "))).toEqual(["state dead"]);
      const at = lines.findIndex((l) => l.startsWith("last error"));
      const column = lines[at]!.indexOf("Error: ok");
      expect(lines.slice(at, at + 3)).toEqual([`${"last error".padEnd(column)}Error: ok`, `${" ".repeat(column)}state             succeeded`, `${" ".repeat(column)}\\x1b[2J`]);
    } finally {
      await d.close();
    }
  });

  it("shows the keys that decide when a job may start: rate, fairness and debounce keys beside the concurrency key", async () => {
    const d = new Docket({ adapter: sqliteAdapter({ filename: join(dir, "keys.db") }) });
    try {
      await d.migrate();
      const rated = await d.enqueue("t", {}, { rateLimit: { key: "api:7", limit: 5, periodMs: 1000 }, fairness: { key: "tenant:7" } });
      const debounced = await d.enqueue("t", {}, { debounce: { key: "doc:42", delayMs: 60_000 } });
      const field = (text: string, name: string) => text.split("\n").find((l) => l.startsWith(name + " "))?.slice(name.length).trim();
      const first = jobDetail((await d.get(rated.id))!);
      expect([field(first, "rate key"), field(first, "fairness key"), field(first, "debounce key")]).toEqual(["api:7", "tenant:7", "-"]);
      expect(field(jobDetail((await d.get(debounced.id))!), "debounce key")).toBe("doc:42");
    } finally {
      await d.close();
    }
  });
});
