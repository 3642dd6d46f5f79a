import { describe, expect, it } from "vitest";
import type { DashboardHandler } from "../../src/dashboard/index.ts";
import { sqliteDocketForFile } from "../support/sqlite-docket.ts";

/** Per-job actions on the job page (run now, cancel, delete) and a schedule's run now; SQLite stands for every adapter (each action is one Docket call, whose conformance cases run on all of them). */
const file = sqliteDocketForFile();

const FORM = { "content-type": "application/x-www-form-urlencoded", origin: "http://127.0.0.1" };
const buttons = (page: string) => [...page.matchAll(/data-action="([a-z-]+)"/g)].map((m) => m[1]);
const get = async (h: DashboardHandler, path: string) => (await h(new Request(`http://127.0.0.1${path}`))).text();

/** Posts the page's form for `path`, with the page's CSRF token, and follows the redirect: the page it lands on. */
async function post(h: DashboardHandler, from: string, path: string): Promise<{ status: number; location: string; page: string }> {
  const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(await get(h, from))![1]!;
  const r = await h(new Request(`http://127.0.0.1${path}`, { method: "POST", headers: FORM, body: `csrf=${csrf}` }));
  const location = r.headers.get("location") ?? "";
  return { status: r.status, location, page: location === "" ? await r.text() : await get(h, location) };
}

describe("dashboard job actions", () => {
  it("a job page shows the buttons its state allows; run now makes a delayed job due, cancel then delete remove it", async () => {
    const h = file.docket.dashboard({ authorize: () => true });
    const job = await file.docket.enqueue("send", { to: "a" }, { queue: "actions", delay: 3_600_000 });
    expect(buttons(await get(h, `/jobs/${job.id}`))).toEqual(["run-now", "cancel"]);
    const ran = await post(h, `/jobs/${job.id}`, `/jobs/${job.id}/run-now`);
    expect([ran.status, ran.location.split("?")[0]]).toEqual([303, `/jobs/${job.id}`]);
    expect(ran.page).toContain("due now: the next claim takes it");
    expect((await file.docket.get(job.id))!.runAt).toBeLessThanOrEqual(Date.now());
    await post(h, `/jobs/${job.id}`, `/jobs/${job.id}/cancel`);
    expect(buttons(await get(h, `/jobs/${job.id}`))).toEqual(["delete"]);
    const deleted = await post(h, `/jobs/${job.id}`, `/jobs/${job.id}/delete`);
    expect(deleted.location.split("?")[0]).toBe("/jobs");
    expect(deleted.page).toContain(`job ${job.id} deleted`);
    expect(await file.docket.get(job.id)).toBeNull();
  });

  it("an action the job's state refuses comes back as the error, in the layout; nothing changes", async () => {
    const h = file.docket.dashboard({ authorize: () => true });
    const job = await file.docket.enqueue("send", { to: "b" }, { queue: "actions" });
    const refused = await post(h, `/jobs/${job.id}`, `/jobs/${job.id}/delete`);
    expect(refused.page).toContain(`cannot delete job ${job.id}: it is ready`);
    const again = await post(h, `/jobs/${job.id}`, `/jobs/${job.id}/run-now`);
    expect(again.page).toContain(`cannot run now job ${job.id}: it is ready`);
    expect((await file.docket.get(job.id))!.state).toBe("ready");
  });

  it("without the permission there is no button, and a forged POST is refused with 403", async () => {
    const h = file.docket.dashboard({ authorize: (_r, a) => a === "view" || a === "cancel" });
    const job = await file.docket.enqueue("send", {}, { queue: "actions", delay: 60_000 });
    expect(buttons(await get(h, `/jobs/${job.id}`))).toEqual(["cancel"]);
    const forged = await post(h, `/jobs/${job.id}`, `/jobs/${job.id}/run-now`);
    expect(forged.status).toBe(403);
    expect(forged.page).toContain("This action is not allowed for you here.");
    expect((await file.docket.get(job.id))!.runAt).toBeGreaterThan(Date.now());
  });

  it("a schedule's Run now enqueues its job at once; its ticks go on", async () => {
    const h = file.docket.dashboard({ authorize: () => true });
    await file.docket.schedules.put("nightly", { cron: "0 3 * * *", task: "report", payload: { kind: "nightly" }, options: { queue: "reports" } });
    expect(await get(h, "/")).toContain('data-action="run-schedule"');
    const ran = await post(h, "/", "/schedules/nightly/run");
    expect(ran.page).toMatch(/schedule nightly: job \d+ enqueued/);
    const [job] = await file.docket.list({ queue: "reports" });
    expect([job!.task, job!.state, job!.payload]).toEqual(["report", "ready", { kind: "nightly" }]);
    expect((await post(h, "/", "/schedules/nope/run")).page).toContain("no schedule");
  });

  it("a schedule's Pause and Resume: paused, its next tick reads paused and the button turns to Resume", async () => {
    const h = file.docket.dashboard({ authorize: () => true });
    await file.docket.schedules.put("hourly", { cron: "0 * * * *", task: "report" });
    const row = (page: string) => /<tr data-schedule="hourly">.*?<\/tr>/s.exec(page)![0];
    expect(buttons(row(await get(h, "/")))).toEqual(["run-schedule", "pause-schedule"]);
    expect((await post(h, "/", "/schedules/hourly/pause")).page).toContain("schedule hourly paused");
    const paused = row(await get(h, "/"));
    expect(paused).toContain("<td>paused</td>");
    expect(buttons(paused)).toEqual(["run-schedule", "resume-schedule"]);
    expect((await post(h, "/", "/schedules/hourly/resume")).page).toContain("schedule hourly resumed");
    expect((await file.docket.schedules.list()).find((s) => s.name === "hourly")!.paused).toBe(false);
    const viewer = file.docket.dashboard({ authorize: (_r, a) => a === "view" });
    expect(buttons(row(await get(viewer, "/")))).toEqual([]);
  });
});

describe("dashboard workers page", () => {
  it("lists each running worker (name, host, pid, queues, concurrency, jobs in hand); a stopped worker is gone", async () => {
    const h = file.docket.dashboard();
    expect(await get(h, "/workers")).toContain("No worker is running");
    const w = file.docket.worker({ name: "page-worker", queues: ["pages", "more"], concurrency: 7, pollMs: 20, logger: null, handlers: { t: () => undefined } });
    await w.start();
    try {
      for (let i = 0; i < 100 && (await file.docket.workers()).length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      const page = await get(h, "/workers");
      expect(page).toMatch(/<tr data-worker="page-worker#[0-9a-z]+"><td>page-worker<\/td>/);
      expect(page).toContain("<td>pages, more</td><td class=\"n\">7</td><td class=\"n\">0</td>");
      expect(page).toContain('<a href="/workers">Workers</a>');
    } finally {
      await w.stop();
    }
    expect(await get(h, "/workers")).toContain("No worker is running");
  });
});

describe("dashboard bulk actions", () => {
  it("a list filtered by state links to its bulk actions; the confirmation states the exact count; confirming applies to at most that many", async () => {
    const h = file.docket.dashboard({ authorize: () => true });
    for (let i = 0; i < 12; i++) await file.docket.enqueue("send", { i }, { queue: "bulk-ui" });
    const list = await get(h, "/jobs?state=ready&queue=bulk-ui");
    expect([...list.matchAll(/data-bulk="([a-z-]+)"/g)].map((m) => m[1])).toEqual(["cancel"]);
    const href = /<a data-bulk="cancel" href="([^"]+)">/.exec(list)![1]!.replaceAll("&amp;", "&");
    expect(href).toBe("/jobs/bulk?action=cancel&state=ready&queue=bulk-ui");
    const confirm = await get(h, href);
    expect(confirm).toContain("Cancel all <strong>12</strong> job(s) that are ready in queue bulk-ui?");
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(confirm)![1]!;
    // Two more arrive after the count was shown: the confirmed 12 are cancelled, not 14.
    await file.docket.enqueue("send", {}, { queue: "bulk-ui" });
    await file.docket.enqueue("send", {}, { queue: "bulk-ui" });
    const body = new URLSearchParams({ csrf, action: "cancel", state: "ready", queue: "bulk-ui", expected: "12" }).toString();
    const r = await h(new Request("http://127.0.0.1/jobs/bulk", { method: "POST", headers: FORM, body }));
    expect(r.status).toBe(303);
    expect(await get(h, r.headers.get("location")!)).toContain("cancel: 12 job(s) done");
    expect(await file.docket.bulk.count({ state: "cancelled", queue: "bulk-ui" })).toBe(12);
    expect(await file.docket.bulk.count({ state: "ready", queue: "bulk-ui" })).toBe(2);
    const bare = await h(new Request("http://127.0.0.1/jobs/bulk", { method: "POST", headers: FORM, body: new URLSearchParams({ csrf, action: "cancel", state: "ready" }).toString() }));
    expect(bare.status).toBe(400);
    expect(await file.docket.bulk.count({ state: "ready", queue: "bulk-ui" })).toBe(2);
  });

  it("no bulk link without a state or without the permission; a confirmation for a state the action does not take is refused", async () => {
    const viewer = file.docket.dashboard();
    expect(await get(viewer, "/jobs?state=ready&queue=bulk-ui")).not.toContain("data-bulk");
    expect((await viewer(new Request("http://127.0.0.1/jobs/bulk?action=cancel&state=ready"))).status).toBe(403);
    const h = file.docket.dashboard({ authorize: () => true });
    expect(await get(h, "/jobs?queue=bulk-ui")).not.toContain("data-bulk");
    expect((await h(new Request("http://127.0.0.1/jobs/bulk?action=delete&state=ready"))).status).toBe(400);
  });
});
