import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { resolve } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Docket } from "../../src/client/docket.ts";
import { serveOnNode } from "../../src/dashboard/node.ts";
import type { DisposableTarget, TargetName } from "../support/targets.ts";
import { REQUIRE_ALL, openTarget } from "../support/targets.ts";

const ARTIFACTS = resolve("test-artifacts");
const CHROMIUM = (() => {
  try {
    return execFileSync("sh", ["-c", "command -v chromium || command -v chromium-browser"], { encoding: "utf8" }).trim() || null;
  } catch {
    return null;
  }
})();
if (!CHROMIUM) {
  if (REQUIRE_ALL) throw new Error("DOCKET_REQUIRE_ALL_ADAPTERS=1 but no chromium binary was found (apt-get install -y chromium)");
  console.warn(`\n${"!".repeat(78)}\n!! SKIPPING the dashboard browser tests: no chromium binary on PATH\n${"!".repeat(78)}\n`);
}

let browser: Browser | null = null;
beforeAll(async () => {
  if (CHROMIUM) browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  mkdirSync(ARTIFACTS, { recursive: true });
}, 60_000);
afterAll(async () => browser?.close());

/** The dashboard, end to end in headless Chromium, on every adapter. */
for (const name of ["sqlite", "postgres", "mysql"] as TargetName[]) {
  describe(`${name}: dashboard in Chromium`, () => {
    let target: DisposableTarget | null = null;
    beforeAll(async () => void (target = await openTarget(name)));
    afterAll(async () => target?.dispose());
    it("renders queues, keys, caps and dead letters; pause/resume works; replay clicked twice replays once; payloads render as text", async (ctx) => {
      if (!target || !browser) return ctx.skip();
      const store = await target.open();
      const adapter = await store.connect();
      await adapter.migrate();
      const docket = new Docket({ adapter, retry: { baseMs: 5, jitter: 0 } });
      const xss = "<script>alert(1)</script>";
      const mail = await docket.enqueue("email", { to: xss }, { queue: "mail" });
      await docket.enqueue("email", {}, { queue: "mail" });
      await docket.enqueue("sync", {}, { queue: "sync", concurrency: { key: "account-7", limit: 1 } });
      await docket.enqueue("sync", {}, { queue: "sync", concurrency: { key: "account-7", limit: 1 } });
      await docket.setQueueCap("mail", 3);
      await docket.setTaskCap("sync", 2);
      await docket.schedules.put("nightly", { cron: "0 3 * * *", timezone: "Europe/Berlin", task: "report" });
      // A schedule put 13 minutes ago (a Docket whose clock says so) that no scheduler has run since: its ticks show as missed.
      await new Docket({ adapter, clock: { now: () => Date.now() - 13 * 60_000 } }).schedules.put("every-5", { cron: "*/5 * * * *", task: "report" });
      const dead = await docket.enqueue("charge", { cents: 100 }, { queue: "billing", maxAttempts: 2 });
      const w = docket.worker({ name: "billing-1", queues: ["billing"], pollMs: 20, logger: null, handlers: { charge: () => Promise.reject(new Error(`declined ${xss}`)) } });
      await w.start();
      await docket.waitFor(dead.id, { timeoutMs: 20_000, pollMs: 20 });
      await w.stop();
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const report = await docket.enqueue("report", {}, { queue: "reports" });
      const reporter = docket.worker({ name: "reports-1", queues: ["reports"], pollMs: 20, logger: null, handlers: { report: () => gate } });
      await reporter.start();
      for (let i = 0; i < 500 && (await docket.get(report.id))?.state !== "running"; i++) await new Promise((r) => setTimeout(r, 10));

      const { server, url } = await serveOnNode(docket.dashboard({ authorize: () => true }), 0);
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      let dialogs = 0;
      page.on("dialog", (d) => void (dialogs++, d.dismiss()));
      try {
        await page.goto(url);
        expect(await page.textContent("#queues tr[data-queue=mail]")).toMatch(/mail\s*2\s*0\s*0\s*0/);
        expect(await page.textContent("#keys")).toContain("account-7");
        expect(await page.textContent("#task-caps")).toMatch(/sync\s*0\s*2/);
        expect(await page.textContent("#schedules")).toContain("Europe/Berlin");
        expect(await page.textContent("#schedules tr[data-schedule=every-5]")).toMatch(/[23] since .* \(no scheduler ran\)/);
        expect(await page.textContent("#schedules tr[data-schedule=nightly]")).toContain("none");
        expect(await page.textContent("#running")).toMatch(new RegExp(`#${report.id}\\s*report\\s*reports\\s*1\\s*–\\s*reports-1\\s*in `));
        await page.screenshot({ path: `${ARTIFACTS}/dashboard-${name}-overview.png`, fullPage: true });
        // A count is a link to those jobs: mail's 2 ready ones, and from there to a job in one more click.
        await page.click(`#queues tr[data-queue=mail] a[href$="jobs?state=ready&queue=mail"]`);
        expect(await page.$$eval("#jobs tr[data-job]", (rows) => rows.length)).toBe(2);
        expect(await page.textContent("h1")).toBe("Jobs ready in mail");
        await page.screenshot({ path: `${ARTIFACTS}/dashboard-${name}-jobs-filtered.png`, fullPage: true });
        await page.click("#jobs tr[data-job] a");
        expect(page.url()).toMatch(/\/jobs\/\d+$/);
        await page.goto(url);

        await page.click("#queues tr[data-queue=mail] button[data-action=pause]");
        expect(await page.textContent("[role=status]")).toBe("queue mail paused");
        expect(await page.textContent("#queues tr[data-queue=mail]")).toContain("paused");
        expect((await docket.listControls()).queues.find((q) => q.queue === "mail")?.paused).toBe(true);
        await page.click("#queues tr[data-queue=mail] button[data-action=resume]");
        expect((await docket.listControls()).queues.find((q) => q.queue === "mail")?.paused).toBe(false);

        await page.goto(`${url}jobs/${dead.id}`);
        const failures = await page.$$eval("#errors tr", (rows) => rows.slice(1).map((r) => [...r.querySelectorAll("td")].map((c) => c.textContent)));
        expect(failures.map(([attempt, , worker, error]) => [attempt, worker, error?.split("\n")[0]])).toEqual([
          ["1", "billing-1", `Error: declined ${xss}`],
          ["2", "billing-1", `Error: declined ${xss}`],
        ]);
        expect(await page.textContent("#timeline")).toMatch(/created.*attempt 1 failed on billing-1.*attempt 2 failed on billing-1.*finished/s);
        await page.screenshot({ path: `${ARTIFACTS}/dashboard-${name}-job.png`, fullPage: true });

        await page.goto(`${url}dead`);
        expect(await page.textContent(`#dead tr[data-job="${dead.id}"]`)).toContain(`declined ${xss}`);
        await page.screenshot({ path: `${ARTIFACTS}/dashboard-${name}-dead-letters.png`, fullPage: true });
        // The bulk replay goes through a confirmation that states the exact count; Cancel leaves everything dead.
        await page.click("#replay-all");
        expect(await page.textContent("#confirm")).toMatch(/^Replay all 1 dead job\(s\)\?/);
        await page.screenshot({ path: `${ARTIFACTS}/dashboard-${name}-replay-all-confirmation.png`, fullPage: true });
        await page.click("text=Cancel");
        expect(page.url()).toBe(`${url}dead`);
        expect((await docket.get(dead.id))?.state).toBe("dead");
        // Replay clicked twice: the browser's click and a second submission of the same form race; one replays, one is told "not dead".
        const form = `#dead tr[data-job="${dead.id}"] form`;
        const action = await page.$eval(form, (f) => (f as HTMLFormElement).action);
        const csrf = await page.$eval(`${form} input[name=csrf]`, (i) => (i as HTMLInputElement).value);
        const [second] = await Promise.all([
          fetch(action, { method: "POST", body: new URLSearchParams({ csrf }), redirect: "manual", headers: { origin: new URL(url).origin } }),
          page.click(`${form} button[data-action=replay]`),
        ]);
        expect(second.status).toBe(303);
        const notices = [decodeURIComponent(new URL(second.headers.get("location")!, url).searchParams.get("notice") ?? ""), await page.textContent("[role=status]")];
        expect(notices.sort()).toEqual([`job ${dead.id} is not dead (already replayed?)`, `job ${dead.id} replayed`].sort());
        const replayed = await docket.get(dead.id);
        expect(replayed?.state).not.toBe("dead");
        expect(replayed?.attempt).toBe(0);
        expect(await docket.deadLetters.list()).toEqual([]);

        await page.goto(`${url}jobs/${mail.id}`);
        expect(await page.textContent("#payload")).toContain(`"to": "${xss}"`);
        expect(await page.$$eval("script", (s) => s.length)).toBe(0);
        await page.goto(`${url}lookup?q=${mail.id}`);
        expect(page.url()).toBe(`${url}jobs/${mail.id}`);
        expect(dialogs).toBe(0);
      } finally {
        release();
        await reporter.stop();
        await page.close();
        await new Promise<void>((r) => server.close(() => r()));
        await adapter.close();
        await store.close();
      }
    }, 120_000);

    it("the controls page: a key's blocked count opens its blocked jobs, a cap's running count its running job; the job list's search box finds dead jobs by error text", async (ctx) => {
      if (!target || !browser) return ctx.skip();
      const store = await target.open();
      const adapter = await store.connect();
      await adapter.migrate();
      const docket = new Docket({ adapter });
      const keyed = [];
      for (let i = 0; i < 3; i++) keyed.push(await docket.enqueue("sync", {}, { queue: "sync", concurrency: { key: "account-7", limit: 1 } }));
      await docket.setQueueCap("sync", 2);
      const now = Date.now();
      expect((await adapter.claim({ queues: ["sync"], limit: 1, now, leaseToken: "browser-sync", leaseExpiresAt: now + 600_000 })).map((j) => j.id)).toEqual([keyed[0]!.id]);
      const charges = await docket.enqueueMany([{ task: "charge", payload: {}, options: { queue: "billing" } }, { task: "charge", payload: {}, options: { queue: "billing" } }]);
      const claimed = await adapter.claim({ queues: ["billing"], limit: 2, now, leaseToken: "browser-billing", leaseExpiresAt: now + 600_000 });
      expect(claimed).toHaveLength(2);
      await adapter.settle({ items: claimed.map((j) => ({ kind: "fail" as const, id: j.id, leaseToken: "browser-billing", now, error: j.id === charges[0]!.id ? "card declined: 100% of limit" : "card declined: 100 of limit", retryAt: null })) });

      const { server, url } = await serveOnNode(docket.dashboard(), 0);
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      try {
        await page.goto(url);
        await page.click('header a[href$="/controls"]');
        expect(await page.textContent("h1")).toBe("Controls");
        expect(await page.textContent("#control-keys tr[data-key=account-7]")).toMatch(/account-7\s*1\s*1\s*1\s*0\s*2/);
        expect(await page.textContent("#queue-caps tr[data-queue=sync]")).toMatch(/sync\s*2\s*1\s*1\s*0/);
        await page.screenshot({ path: `${ARTIFACTS}/dashboard-${name}-controls.png`, fullPage: true });
        await page.click('#control-keys tr[data-key=account-7] a[href$="jobs?state=blocked&key=account-7"]');
        expect(await page.textContent("h1")).toBe("Jobs blocked under key account-7");
        expect(await page.$$eval("#jobs tr[data-job]", (rows) => rows.map((r) => Number(r.getAttribute("data-job"))))).toEqual([keyed[1]!.id, keyed[2]!.id]);
        await page.goBack();
        await page.click('#queue-caps tr[data-queue=sync] a[href$="jobs?state=running&queue=sync"]');
        expect(await page.$$eval("#jobs tr[data-job]", (rows) => rows.map((r) => Number(r.getAttribute("data-job"))))).toEqual([keyed[0]!.id]);

        await page.goto(`${url}jobs`);
        await page.fill("#filter input[name=errorContains]", "100%");
        await page.click("#filter button");
        expect(await page.textContent("h1")).toBe("Jobs dead whose last error contains “100%”");
        expect(await page.$$eval("#jobs tr[data-job]", (rows) => rows.map((r) => Number(r.getAttribute("data-job"))))).toEqual([charges[0]!.id]);
        expect(await page.textContent("#jobs td.last-error")).toBe("card declined: 100% of limit");
      } finally {
        await page.close();
        await new Promise<void>((r) => server.close(() => r()));
        await adapter.close();
        await store.close();
      }
    }, 120_000);

    it("a job's run now, cancel and delete; the workers page; a bulk cancel through its exact-count confirmation; a schedule's pause, resume and run now", async (ctx) => {
      if (!target || !browser) return ctx.skip();
      const store = await target.open();
      const adapter = await store.connect();
      await adapter.migrate();
      const docket = new Docket({ adapter });
      const delayed = await docket.enqueue("send", { to: "a" }, { queue: "actions", delay: 3_600_000 });
      const bulk = await docket.enqueueMany([1, 2, 3].map((i) => ({ task: "send", payload: { i }, options: { queue: "bulk" } })));
      await docket.schedules.put("nightly", { cron: "0 3 * * *", task: "report", options: { queue: "reports" } });
      const worker = docket.worker({ name: "browser-1", queues: ["idle"], concurrency: 3, pollMs: 20, logger: null, handlers: { idle: () => undefined } });
      await worker.start();
      const { server, url } = await serveOnNode(docket.dashboard({ authorize: () => true }), 0);
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      try {
        await page.goto(`${url}jobs/${delayed.id}`);
        await page.screenshot({ path: `${ARTIFACTS}/dashboard-${name}-job-actions.png`, fullPage: true });
        await page.click("button[data-action=run-now]");
        expect(await page.textContent("[role=status]")).toBe("due now: the next claim takes it");
        expect((await docket.get(delayed.id))!.runAt).toBeLessThanOrEqual(Date.now());
        await page.click("button[data-action=cancel]");
        expect((await docket.get(delayed.id))!.state).toBe("cancelled");
        await page.click("button[data-action=delete]");
        expect(await page.textContent("[role=status]")).toBe(`job ${delayed.id} deleted`);
        expect(await docket.get(delayed.id)).toBeNull();

        await page.click('header a[href$="/workers"]');
        expect(await page.textContent("#workers")).toMatch(/browser-1.*idle\s*3\s*0/s);
        await page.screenshot({ path: `${ARTIFACTS}/dashboard-${name}-workers.png`, fullPage: true });

        await page.goto(`${url}jobs?state=ready&queue=bulk`);
        await page.click("#bulk a[data-bulk=cancel]");
        expect(await page.textContent("#confirm")).toMatch(/^Cancel all 3 job\(s\) that are ready in queue bulk\?/);
        await page.screenshot({ path: `${ARTIFACTS}/dashboard-${name}-bulk-confirmation.png`, fullPage: true });
        await page.click("button[data-action=bulk-cancel]");
        expect((await Promise.all(bulk.map((j) => docket.get(j.id)))).map((j) => j!.state)).toEqual(["cancelled", "cancelled", "cancelled"]);

        await page.goto(url);
        await page.click("#schedules tr[data-schedule=nightly] button[data-action=pause-schedule]");
        expect(await page.textContent("[role=status]")).toBe("schedule nightly paused");
        expect(await page.textContent("#schedules tr[data-schedule=nightly]")).toContain("paused");
        await page.click("#schedules tr[data-schedule=nightly] button[data-action=resume-schedule]");
        expect((await docket.schedules.list()).find((x) => x.name === "nightly")!.paused).toBe(false);
        await page.click("#schedules tr[data-schedule=nightly] button[data-action=run-schedule]");
        expect(await page.textContent("[role=status]")).toMatch(/^schedule nightly: job \d+ enqueued/);
        expect((await docket.list({ queue: "reports" })).map((j) => [j.task, j.state])).toEqual([["report", "ready"]]);
      } finally {
        await page.close();
        await new Promise<void>((r) => server.close(() => r()));
        await worker.stop();
        await adapter.close();
        await store.close();
      }
    }, 120_000);

    it("mutations are POST-only, need the CSRF token and a same-site origin, and are refused unless authorize allows them or when read-only", async (ctx) => {
      if (!target) return ctx.skip();
      const store = await target.open();
      const adapter = await store.connect();
      await adapter.migrate();
      const docket = new Docket({ adapter });
      await docket.enqueue("t", {}, { queue: "q" });
      const token = async (handler: (r: Request) => Promise<Response>) => /name="csrf" value="([0-9a-f]+)"/.exec(await (await handler(new Request("http://x/"))).text())?.[1];
      const post = (handler: (r: Request) => Promise<Response>, csrf: string | undefined, headers: Record<string, string> = {}) =>
        handler(new Request("http://x/queues/q/pause", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...headers }, body: `csrf=${csrf ?? ""}` }));
      const open = docket.dashboard({ authorize: () => true });
      const good = await token(open);
      expect(good).toMatch(/^[0-9a-f]{48}$/);
      expect((await open(new Request("http://x/queues/q/pause"))).status).toBe(404);
      expect((await post(open, undefined)).status).toBe(403);
      expect((await post(open, "0".repeat(48))).status).toBe(403);
      expect((await post(open, good, { origin: "http://evil.example" })).status).toBe(403);
      expect((await docket.listControls()).queues).toEqual([]);
      const byDefault = docket.dashboard();
      expect((await post(byDefault, await token(byDefault))).status).toBe(403);
      const readOnly = docket.dashboard({ readOnly: true, authorize: () => true });
      expect(await token(readOnly)).toBeUndefined();
      expect((await (await readOnly(new Request("http://x/"))).text())).not.toContain("<form class=\"inline\" method=\"post\"");
      expect((await docket.listControls()).queues).toEqual([]);
      const ok = await post(open, good, { origin: "http://x" });
      expect(ok.status).toBe(303);
      expect((await docket.listControls()).queues).toEqual([{ queue: "q", paused: true, maxRunning: null, rateLimit: null }]);
      const mounted = docket.dashboard({ basePath: "/admin/queue/" });
      expect((await mounted(new Request("http://x/admin/queue/"))).status).toBe(200);
      expect((await mounted(new Request("http://x/other"))).status).toBe(404);
      await adapter.close();
      await store.close();
    }, 60_000);
  });
}
