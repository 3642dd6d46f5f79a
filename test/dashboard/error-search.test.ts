import { describe, expect, it } from "vitest";
import type { Job } from "../../src/core/job.ts";
import { sqliteDocketForFile } from "../support/sqlite-docket.ts";

/**
 * The job list's search by error text (`errorContains`): dead jobs by
 * default, or retrying, cancelled or succeeded ones; the text matched
 * literally; paged by id. The search is docket.list's: SQLite stands for
 * every adapter (the conformance kit checks the match on each).
 */
const file = sqliteDocketForFile();

const ids = (page: string) => [...page.matchAll(/<tr data-job="(\d+)">/g)].map((m) => Number(m[1]));

/** Jobs of `queue` whose one attempt failed with each of `errors`, in order: dead, or (with `retry`) scheduled for a retry in an hour. */
async function failWith(queue: string, errors: string[], retry = false): Promise<Job[]> {
  const { docket } = file;
  const jobs = await docket.enqueueMany(errors.map(() => ({ task: "charge", payload: {}, options: { queue } })));
  const now = Date.now();
  const leaseToken = `search-${queue}`;
  const claimed = await docket.adapter.claim({ queues: [queue], limit: errors.length, now, leaseToken, leaseExpiresAt: now + 60_000 });
  expect(claimed.map((j) => j.id).sort((a, b) => a - b)).toEqual(jobs.map((j) => j.id));
  const errorOf = (id: number) => errors[jobs.findIndex((j) => j.id === id)]!;
  await docket.adapter.settle({ items: claimed.map((j) => ({ kind: "fail" as const, id: j.id, leaseToken, now, error: errorOf(j.id), retryAt: retry ? now + 3_600_000 : null })) });
  return jobs;
}

describe("dashboard error search", () => {
  it("finds dead jobs by their last error's text, literally (a % or _ is itself), and shows that error; other states on request", async () => {
    const [percent, hundred, underscore, anyChar] = await failWith("billing", ["quota 100% used", "quota 100 used", "disk a_b full", "disk axb full"]);
    const [retrying] = await failWith("retries", ["quota 100% used again"], true);
    const handler = file.docket.dashboard();
    const get = async (path: string) => (await handler(new Request(`http://127.0.0.1${path}`))).text();

    const found = await get(`/jobs?errorContains=${encodeURIComponent("100%")}`);
    expect(ids(found)).toEqual([percent!.id]);
    expect(found).toContain("<title>Jobs dead whose last error contains “100%” · docket</title>");
    expect(found).toContain("<th>last error</th>");
    expect(found).toContain("<pre>quota 100% used</pre>");
    expect(found).toContain('<option value="dead" selected>dead</option>');
    expect(found).toContain('value="100%"');
    expect(ids(await get(`/jobs?state=dead&errorContains=${encodeURIComponent("100")}`))).toEqual([percent!.id, hundred!.id]);
    expect(ids(await get("/jobs?errorContains=a_b"))).toEqual([underscore!.id]);
    expect(ids(await get("/jobs?errorContains=b+full&queue=billing"))).toEqual([underscore!.id, anyChar!.id]);
    expect(ids(await get(`/jobs?state=scheduled&errorContains=${encodeURIComponent("100%")}`))).toEqual([retrying!.id]);
    expect(await get("/jobs?errorContains=Quota")).toContain("No jobs match.");
    // A blank search is no search: the list is unfiltered, without the error column.
    const blank = await get("/jobs?queue=billing&errorContains=+");
    expect(ids(blank)).toEqual([percent!.id, hundred!.id, underscore!.id, anyChar!.id]);
    expect(blank).not.toContain("<th>last error</th>");
    // The value is echoed escaped.
    expect(await get(`/jobs?errorContains=${encodeURIComponent('"><b>')}`)).toContain('value="&quot;&gt;&lt;b&gt;"');
  });

  it("a state other than dead, scheduled, cancelled or succeeded, or a text over 200 characters, is refused inside the layout with a way back", async () => {
    const handler = file.docket.dashboard();
    for (const [query, reason] of [
      ["state=ready&errorContains=x", "An error search looks in dead, scheduled, cancelled, succeeded jobs, not ready ones."],
      [`errorContains=${"x".repeat(201)}`, "errorContains must be a non-empty string of at most 200 characters"],
    ] as const) {
      const r = await handler(new Request(`http://127.0.0.1/jobs?${query}`));
      expect(r.status).toBe(400);
      const text = await r.text();
      expect(text).toContain(reason);
      expect(text).toContain('<a href="/jobs">Back</a>');
    }
    expect((await handler(new Request(`http://127.0.0.1/jobs?errorContains=${"x".repeat(200)}`))).status).toBe(200);
  });

  it("a full page of matches links to the next, which keeps the search; a search offers no bulk action (those apply to the whole state)", async () => {
    const jobs = await failWith("paged", Array.from({ length: 101 }, (_, i) => `gateway timeout #${i}`));
    const handler = file.docket.dashboard({ authorize: () => true });
    const get = async (path: string) => (await handler(new Request(`http://127.0.0.1${path}`))).text();
    const first = await get("/jobs?errorContains=gateway+timeout");
    expect(ids(first)).toEqual(jobs.slice(0, 100).map((j) => j.id));
    const next = /<a id="next" href="([^"]+)">/.exec(first)![1]!.replaceAll("&amp;", "&");
    expect(next).toBe(`/jobs?state=dead&errorContains=gateway+timeout&after=${jobs[99]!.id}`);
    expect(ids(await get(next))).toEqual([jobs[100]!.id]);
    expect(first).not.toContain('id="bulk"');
    expect(await get("/jobs?state=dead")).toContain('id="bulk"');
    const bulk = await handler(new Request("http://127.0.0.1/jobs/bulk?action=replay&state=dead&errorContains=gateway"));
    expect(bulk.status).toBe(400);
    // The dead letters page searches dead jobs.
    expect(await get("/dead")).toContain('<form method="get" action="/jobs" id="dead-search"><input type="hidden" name="state" value="dead">');
  });
});
