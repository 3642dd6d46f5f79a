import { describe, expect, it } from "vitest";
import { sqliteDocketForFile } from "../support/sqlite-docket.ts";

/** The dashboard's job list: counts link to it, filters by state, queue and task, pages by id (keyset). SQLite stands for every adapter: the list is the adapter's `list`. */
const file = sqliteDocketForFile();

const ids = (page: string) => [...page.matchAll(/<tr data-job="(\d+)">/g)].map((m) => Number(m[1]));

describe("dashboard job list", () => {
  it("the overview's counts link to the filtered list; a full page links to the next one, which starts after its last id", async () => {
    const many = (await file.docket.enqueueMany(Array.from({ length: 150 }, (_, i) => ({ task: "send", payload: { i }, options: { queue: "many" } })))).map((j) => j.id);
    const other = await file.docket.enqueue("other", {}, { queue: "many", delay: 60_000 });
    const handler = file.docket.dashboard();
    const get = async (path: string) => (await handler(new Request(`http://127.0.0.1${path}`))).text();
    const overview = await get("/");
    expect(overview).toContain('<a href="/jobs?state=ready&amp;queue=many">150</a>');
    expect(overview).toContain('<a href="/jobs?state=scheduled&amp;queue=many">1</a>');
    const first = await get("/jobs?state=ready&queue=many");
    expect(ids(first)).toEqual(many.slice(0, 100));
    const next = /<a id="next" href="([^"]+)">/.exec(first)![1]!.replaceAll("&amp;", "&");
    expect(next).toBe(`/jobs?state=ready&queue=many&after=${many[99]}`);
    const second = await get(next);
    expect(ids(second)).toEqual(many.slice(100));
    expect(second).not.toContain('id="next"');
    expect(ids(await get("/jobs?queue=many&task=other"))).toEqual([other.id]);
    expect(await get("/jobs?queue=nothing-here")).toContain("No jobs match.");
  });

  it("the overview counts jobs waiting for their parents, in a column of their own linked to their list", async () => {
    const parent = await file.docket.enqueue("charge", {}, { queue: "flow" });
    const child = await file.docket.enqueue("invoice", {}, { queue: "flow", after: [parent.id] });
    const handler = file.docket.dashboard();
    const get = async (path: string) => (await handler(new Request(`http://127.0.0.1${path}`))).text();
    const overview = await get("/");
    expect(overview).toContain("<th>waiting</th>");
    expect(overview).toContain('<a href="/jobs?state=waiting&amp;queue=flow">1</a>');
    expect(ids(await get("/jobs?state=waiting&queue=flow"))).toEqual([child.id]);
  });

  it("an unknown state is refused inside the layout, with a way back", async () => {
    const r = await file.docket.dashboard()(new Request("http://127.0.0.1/jobs?state=bogus"));
    expect(r.status).toBe(400);
    const text = await r.text();
    expect(text).toContain("No such state: bogus.");
    expect(text).toContain('<a href="/jobs">Back</a>');
  });

  it("live refresh is off by default; the header's switch turns it on (a meta refresh, no script) and keeps the page's filters", async () => {
    const handler = file.docket.dashboard();
    const get = async (path: string) => (await handler(new Request(`http://127.0.0.1${path}`))).text();
    const off = await get("/jobs?queue=many");
    expect(off).not.toContain('http-equiv="refresh"');
    expect(off).toContain('<a href="/jobs?queue=many&amp;refresh=5">5 s</a>');
    const on = await get("/jobs?queue=many&refresh=5");
    expect(on).toContain('<meta http-equiv="refresh" content="5">');
    expect(on).toContain("<strong>5 s</strong>");
    expect(on).toContain('<a href="/jobs?queue=many">off</a>');
    expect(await get("/?refresh=7")).not.toContain('http-equiv="refresh"');
  });
});

describe("dashboard job list by concurrency key", () => {
  it("each key of the overview links to its jobs, its blocked count to its blocked jobs; the list filters by key", async () => {
    const holder = await file.docket.enqueue("sync", {}, { queue: "keyed", concurrency: { key: "account-9", limit: 1 } });
    const waiting = await file.docket.enqueue("sync", {}, { queue: "keyed", concurrency: { key: "account-9", limit: 1 } });
    await file.docket.enqueue("sync", {}, { queue: "keyed", concurrency: { key: "account-10", limit: 1 } });
    const handler = file.docket.dashboard();
    const get = async (path: string) => (await handler(new Request(`http://127.0.0.1${path}`))).text();
    const overview = await get("/");
    expect(overview).toContain('<a href="/jobs?key=account-9">account-9</a>');
    expect(overview).toContain('<a href="/jobs?state=blocked&amp;key=account-9">1</a>');
    expect(ids(await get("/jobs?key=account-9"))).toEqual([holder.id, waiting.id]);
    expect(ids(await get("/jobs?key=account-9&state=blocked"))).toEqual([waiting.id]);
    expect(await get("/jobs?key=account-9")).toContain("<title>Jobs under key account-9 · docket</title>");
  });
});
