import { describe, expect, it } from "vitest";
import { sqliteDocketForFile } from "../support/sqlite-docket.ts";

/**
 * The dashboard's controls page: each concurrency key and each queue and
 * task cap with its counts, every count a link to the jobs it counts. The
 * counts are docket.stats(), the lists docket.list(): SQLite stands for every adapter.
 */
const file = sqliteDocketForFile();

const ids = (page: string) => [...page.matchAll(/<tr data-job="(\d+)">/g)].map((m) => Number(m[1]));
const row = (page: string, attribute: string) => new RegExp(`<tr ${attribute}>.*?</tr>`, "s").exec(page)?.[0] ?? "";

describe("dashboard controls page", () => {
  it("on a store with no key, cap or rate limit, says so for each", async () => {
    const page = await (await file.docket.dashboard()(new Request("http://127.0.0.1/controls"))).text();
    for (const text of ["No key has jobs in use or waiting.", "No queue caps.", "No task caps.", "No rate limits."]) expect(page).toContain(text);
  });

  it("lists keys (running, ready and blocked jobs), queue caps and task caps with their counts, each linking to those jobs; the header links to it", async () => {
    const { docket } = file;
    const claim = (queue: string, limit: number) => {
      const now = Date.now();
      return docket.adapter.claim({ queues: [queue], limit, now, leaseToken: `controls-${queue}`, leaseExpiresAt: now + 600_000 });
    };
    const keyed = [];
    for (let i = 0; i < 4; i++) keyed.push(await docket.enqueue("sync", {}, { queue: "keyed", concurrency: { key: "account-1", limit: 2 } }));
    await docket.setQueueCap("capped", 1);
    const capped = await docket.enqueueMany(Array.from({ length: 3 }, () => ({ task: "crunch", payload: {}, options: { queue: "capped" } })));
    await docket.setTaskCap("report", 3);
    const reports = await docket.enqueueMany(Array.from({ length: 2 }, () => ({ task: "report", payload: {}, options: { queue: "reports" } })));
    expect((await claim("keyed", 1)).map((j) => j.id)).toEqual([keyed[0]!.id]);
    expect((await claim("capped", 2)).map((j) => j.id)).toEqual([capped[0]!.id]);

    const handler = docket.dashboard();
    const get = async (path: string) => (await handler(new Request(`http://127.0.0.1${path}`))).text();
    expect(await get("/")).toContain('<a href="/controls">Controls</a>');
    const page = await get("/controls");
    expect(page).toContain("<title>Controls · docket</title>");

    const key = row(page, 'data-key="account-1"');
    expect(key).toContain('<a href="/jobs?key=account-1">account-1</a>');
    expect([...key.matchAll(/<td class="n">(.*?)<\/td>/g)].map((m) => m[1])).toEqual([
      "2",
      "2",
      '<a href="/jobs?state=running&amp;key=account-1">1</a>',
      '<a href="/jobs?state=ready&amp;key=account-1">1</a>',
      '<a href="/jobs?state=blocked&amp;key=account-1">2</a>',
    ]);
    expect(ids(await get("/jobs?state=running&key=account-1"))).toEqual([keyed[0]!.id]);
    expect(ids(await get("/jobs?state=ready&key=account-1"))).toEqual([keyed[1]!.id]);
    expect(ids(await get("/jobs?state=blocked&key=account-1"))).toEqual([keyed[2]!.id, keyed[3]!.id]);

    expect(row(page, 'data-queue="capped"')).toBe(
      '<tr data-queue="capped"><td>capped</td><td class="n">1</td><td class="n"><a href="/jobs?state=running&amp;queue=capped">1</a></td><td class="n">full</td><td class="n"><a href="/jobs?state=ready&amp;queue=capped">2</a></td></tr>',
    );
    expect(ids(await get("/jobs?state=running&queue=capped"))).toEqual([capped[0]!.id]);
    expect(ids(await get("/jobs?state=ready&queue=capped"))).toEqual([capped[1]!.id, capped[2]!.id]);
    expect(row(page, 'data-task="report"')).toBe(
      '<tr data-task="report"><td>report</td><td class="n">3</td><td class="n">0</td><td class="n">3</td><td class="n"><a href="/jobs?state=ready&amp;task=report">2</a></td></tr>',
    );
    expect(ids(await get("/jobs?state=ready&task=report"))).toEqual(reports.map((j) => j.id));
    // Queues and tasks without a cap are not listed.
    expect(page).not.toContain('data-queue="keyed"');
    expect(page).not.toContain('data-task="sync"');

    expect(page).toContain("No rate limits.");
    await docket.setQueueRateLimit("reports", { limit: 10, periodMs: 60_000 });
    const limited = await get("/controls");
    expect(limited).toContain('1 rate limit(s): <a id="rate-limits-link" href="/#rate-limits">on the overview</a>.');
    expect(await get("/")).toContain('<table id="rate-limits">');
  });
});
