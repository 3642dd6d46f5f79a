import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openUrl } from "../../src/cli/open.ts";
import { Docket } from "../../src/core/docket.ts";
import { PG_URL, createMysqlTestDatabase, createPgTestDatabase, dropMysqlDatabase, dropPgDatabase } from "../support/targets.ts";

const TSX = resolve("node_modules/.bin/tsx");
const BIN = resolve("src/cli/bin.ts");

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `docket …` as a user would (a child process), with --url. */
function docket(url: string | null, ...args: string[]): Promise<Ran> {
  return new Promise((done) => {
    execFile(TSX, [BIN, ...args, ...(url === null ? [] : ["--url", url])], { timeout: 60_000, env: { ...process.env, DOCKET_URL: "" } }, (error, stdout, stderr) => {
      done({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr: stderr.replace(/^npm warn.*\n/gm, "") });
    });
  });
}

const pgDb = await createPgTestDatabase("docket_cli", "the CLI on PostgreSQL");
const mysqlDb = await createMysqlTestDatabase("docket_cli", "the CLI on MariaDB");
const dir = mkdtempSync(join(tmpdir(), "docket-cli-"));
afterAll(async () => {
  if (pgDb) await dropPgDatabase(PG_URL, pgDb.database);
  if (mysqlDb) await dropMysqlDatabase(mysqlDb.database);
  rmSync(dir, { recursive: true, force: true });
});

/** Issue 11 item 3: the `docket` command, on every adapter. */
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
      let ids: { mail: number; dead: number; keyed: number };
      try {
        const mail = await d.enqueue("mail", { to: "<script>alert(1)</script>" }, { queue: "email" });
        await d.enqueue("mail", {}, { queue: "email" });
        const keyed = await d.enqueue("sync", {}, { queue: "sync", concurrency: { key: "account-7", limit: 1 } });
        await d.enqueue("sync", {}, { queue: "sync", concurrency: { key: "account-7", limit: 1 } });
        const dead = await d.enqueue("charge", { cents: 100 }, { queue: "billing", maxAttempts: 1 });
        const w = d.worker({ name: "billing-1", queues: ["billing"], pollMs: 20, logger: null, handlers: { charge: () => Promise.reject(new Error("card declined")) } });
        await w.start();
        await d.waitFor(dead.id, { timeoutMs: 20_000, pollMs: 20 });
        await w.stop();
        await d.schedules.put("nightly-report", { cron: "0 3 * * *", timezone: "Europe/Berlin", task: "report" });
        ids = { mail: mail.id, dead: dead.id, keyed: keyed.id };
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
      expect(stats.keys).toEqual([{ key: "account-7", limit: 1, holders: 1, blocked: 1 }]);
      expect((await run("status")).stdout).toMatch(/email\s+2\s+0\s+0\s+0/);

      const listed = await run("jobs", "list", "--queue", "email");
      expect(listed.stdout).toContain(String(ids.mail));
      expect((await run("jobs", "show", String(ids.mail))).stdout).toContain('"to":"<script>alert(1)</script>"');
      expect((await run("jobs", "cancel", String(ids.keyed))).stdout).toContain(`cancelled job ${ids.keyed}`);
      const again = await run("jobs", "cancel", String(ids.keyed));
      expect(again.code).toBe(1);
      expect(again.stderr).toMatch(/cancelled/);
      expect((await run("jobs", "show", "999999")).code).toBe(1);

      expect((await run("dlq", "list")).stdout).toContain("card declined");
      const deadJob = (await run("jobs", "show", String(ids.dead))).stdout;
      expect(deadJob).toMatch(/worker\s+billing-1/);
      expect(deadJob).toMatch(/attempt 1 failed\s+\S+ on billing-1: Error: card declined/);
      expect((await run("dlq", "replay", String(ids.dead))).stdout).toContain(`replayed job ${ids.dead}`);
      expect((await run("dlq", "replay", String(ids.dead))).code).toBe(1);
      expect((await run("dlq", "replay-all", "--json")).stdout).toContain('"replayed": 0');

      expect((await run("queues", "pause", "email")).stdout).toBe("queue email paused\n");
      expect((await run("queues", "cap", "email", "2")).stdout).toBe("queue email: cap 2\n");
      expect(JSON.parse((await run("queues", "list", "--json")).stdout).queues).toEqual([{ queue: "email", paused: true, maxRunning: 2 }]);
      expect((await run("queues", "resume", "email")).stdout).toBe("queue email resumed\n");
      expect((await run("schedules", "list")).stdout).toMatch(/nightly-report\s+0 3 \* \* \*\s+Europe\/Berlin\s+report/);
      expect((await run("purge", "--older-than", "0ms")).stdout).toMatch(/deleted 1 finished job\(s\)/);

      expect((await run("jobs", "show", "abc")).code).toBe(2);
      expect((await run("jobs", "frobnicate")).code).toBe(2);
      expect((await run("purge")).code).toBe(2);
      expect((await run("status", "--bogus")).code).toBe(2);
      expect((await docket(null, "status")).code).toBe(2);
      console.log(`--- docket CLI on ${adapter} ---\n${transcript.join("\n")}`);
    }, 180_000);
  }
  it("docket dashboard serves the dashboard until SIGINT, then exits 0", async () => {
    const url = `sqlite:${join(dir, "dashboard.db")}`;
    expect((await docket(url, "migrate")).code).toBe(0);
    const child = spawn(TSX, [BIN, "dashboard", "--port", "0", "--url", url], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, DOCKET_DASHBOARD_TOKEN: "cli-test-token" } });
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
    expect(await page.text()).toContain("<title>Queues · docket</title>");
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
