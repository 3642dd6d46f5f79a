import { createHmac } from "node:crypto";
import { request as httpRequest } from "node:http";
import type { Server } from "node:http";
import { describe, expect, it } from "vitest";
import type { DashboardHandler, DashboardOptions } from "../../src/dashboard/index.ts";
import { serveOnNode } from "../../src/dashboard/node.ts";
import { sqliteDocketForFile } from "../support/sqlite-docket.ts";

/**
 * The dashboard handler's request checks: the origin behind a proxy, paths
 * starting with "//", CSRF tokens shared by instances with one secret,
 * banners only from signed messages, and the body cap. The checks do not
 * depend on the database, so SQLite stands for every adapter.
 */
const file = sqliteDocketForFile();
const SECRET = "a shared dashboard secret, 32+ bytes";


const FORM = { "content-type": "application/x-www-form-urlencoded" };
async function tokenOf(handler: DashboardHandler, url = "http://127.0.0.1/", headers: Record<string, string> = {}): Promise<string> {
  const page = await (await handler(new Request(url, { headers }))).text();
  const token = /name="csrf" value="([0-9a-f]+)"/.exec(page)?.[1];
  expect(token, "a CSRF token in the page").toBeTruthy();
  return token!;
}
async function paused(queue: string): Promise<boolean> {
  return (await file.docket.listControls()).queues.find((q) => q.queue === queue)?.paused ?? false;
}

describe("dashboard request checks", () => {
  it("behind a TLS-terminating proxy: a POST with Origin https://ops.example.com succeeds with publicOrigin or trustProxy, and is refused without either", async () => {
    await file.docket.enqueue("t", {}, { queue: "proxied" });
    // What the proxy forwards: plain http to the app, the browser's Host and Origin.
    const proxied = { host: "ops.example.com", "x-forwarded-proto": "https", "x-forwarded-host": "ops.example.com" };
    const post = async (options: DashboardOptions) => {
      const handler = file.docket.dashboard({ authorize: () => true, ...options });
      const csrf = await tokenOf(handler, "http://ops.example.com/", proxied);
      const r = await handler(new Request("http://ops.example.com/queues/proxied/pause", { method: "POST", headers: { ...FORM, ...proxied, origin: "https://ops.example.com" }, body: `csrf=${csrf}` }));
      return { status: r.status, text: await r.text() };
    };
    expect(await post({})).toMatchObject({ status: 403, text: expect.stringContaining("A request from another site was refused.") });
    expect(await paused("proxied")).toBe(false);
    expect((await post({ publicOrigin: "https://ops.example.com" })).status).toBe(303);
    expect(await paused("proxied")).toBe(true);
    await file.docket.resumeQueue("proxied");
    expect((await post({ trustProxy: true })).status).toBe(303);
    expect(await paused("proxied")).toBe(true);
    // Another site stays refused under either setting.
    const handler = file.docket.dashboard({ authorize: () => true, publicOrigin: "https://ops.example.com", trustProxy: true });
    const csrf = await tokenOf(handler);
    const evil = await handler(new Request("http://ops.example.com/queues/proxied/resume", { method: "POST", headers: { ...FORM, ...proxied, origin: "https://evil.example" }, body: `csrf=${csrf}` }));
    expect(evil.status).toBe(403);
  });

  it("a path starting with // stays a path: POST //evil.example/… with Origin http://evil.example is refused by the origin check (node bridge)", async () => {
    await file.docket.enqueue("t", {}, { queue: "slashes" });
    const handler = file.docket.dashboard({ authorize: () => true });
    const { server, url } = await serveOnNode(handler, 0);
    file.onClose(() => new Promise((r) => (server as Server).close(() => r())));
    const page = await (await fetch(url)).text();
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(page)![1]!;
    const { port } = new URL(url);
    const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = httpRequest({ host: "127.0.0.1", port, method: "POST", path: "//evil.example/queues/slashes/pause", headers: { ...FORM, origin: "http://evil.example" } }, (res) => {
        let text = "";
        res.on("data", (d) => (text += d)).on("end", () => resolve({ status: res.statusCode!, text }));
      });
      req.on("error", reject);
      req.end(`csrf=${csrf}`);
    });
    console.log(`POST //evil.example/queues/slashes/pause with Origin http://evil.example: ${answer.status} ${answer.text}`);
    expect(answer).toMatchObject({ status: 403, text: expect.stringContaining("A request from another site was refused.") });
    expect(await paused("slashes")).toBe(false);
  });

  it("CSRF tokens are stateless: a token from one instance is accepted by another with the same secret; forged, absent, expired or other-secret tokens are refused", async () => {
    await file.docket.enqueue("t", {}, { queue: "balanced" });
    const a = file.docket.dashboard({ authorize: () => true, secret: SECRET });
    const b = file.docket.dashboard({ authorize: () => true, secret: SECRET }); // another process behind the balancer, or after a restart
    const other = file.docket.dashboard({ authorize: () => true, secret: "another secret of enough length" });
    const token = await tokenOf(a);
    const post = (h: DashboardHandler, csrf: string, path = "queues/balanced/pause") =>
      h(new Request(`http://127.0.0.1/${path}`, { method: "POST", headers: { ...FORM, origin: "http://127.0.0.1" }, body: `csrf=${csrf}` })).then((r) => r.status);
    const forged = token.slice(0, 47) + (token[47] === "0" ? "1" : "0");
    expect(await post(b, forged)).toBe(403);
    expect(await post(b, "")).toBe(403);
    expect(await post(other, token)).toBe(403);
    // A token 25 hours old, correctly signed: expired.
    const head = Math.floor((Date.now() - 25 * 3_600_000) / 1_000).toString(16).padStart(8, "0") + "0badcafe";
    const old = head + createHmac("sha256", SECRET).update(`csrf\0${head}`).digest("hex").slice(0, 32);
    expect(await post(b, old)).toBe(403);
    expect(await paused("balanced")).toBe(false);
    expect(await post(b, token)).toBe(303);
    expect(await paused("balanced")).toBe(true);
  });

  it("banners show only messages the server produced: ?error= and ?notice= from a link are ignored; pause, replay, cancel error and lookup miss still show theirs", async () => {
    const handler = file.docket.dashboard({ authorize: () => true });
    const get = async (path: string) => (await handler(new Request(`http://127.0.0.1${path}`))).text();
    const planted = "Your session expired, call 555";
    for (const path of [`/?error=${encodeURIComponent(planted)}`, `/?notice=${encodeURIComponent(planted)}`, `/dead?error=${encodeURIComponent(planted)}&sig=00000000000000000000000000000000`]) {
      const page = await get(path);
      expect(page, path).not.toContain("Your session expired");
      expect(page).not.toMatch(/role="(alert|status)"/);
    }
    const banner = (page: string) => /<div class="notice[^"]*" role="(?:status|alert)">([^<]*)<\/div>/.exec(page)?.[1];
    const follow = async (path: string) => {
      const csrf = await tokenOf(handler);
      const r = await handler(new Request(`http://127.0.0.1/${path}`, { method: "POST", headers: { ...FORM, origin: "http://127.0.0.1" }, body: `csrf=${csrf}` }));
      expect(r.status).toBe(303);
      return banner(await get(r.headers.get("location")!));
    };
    await file.docket.enqueue("t", {}, { queue: "banners" });
    expect(await follow("queues/banners/pause")).toBe("queue banners paused");
    const dead = await file.docket.enqueue("charge", {}, { queue: "banner-dead", maxAttempts: 1 });
    const w = file.docket.worker({ queues: ["banner-dead"], pollMs: 10, logger: null, handlers: { charge: () => Promise.reject(new Error("declined")) } });
    await w.start();
    await file.docket.waitFor(dead.id, { timeoutMs: 10_000, pollMs: 10 });
    await w.stop();
    expect(await follow(`dead/${dead.id}/replay`)).toBe(`job ${dead.id} replayed`);
    const done = await file.docket.enqueue("t", {}, { queue: "banner-cancel" });
    await file.docket.cancel(done.id);
    expect(await follow(`jobs/${done.id}/cancel`)).toMatch(/cancelled/);
    // A signed banner moved to another page is not shown: job 20's "cancelled" on job 21's page.
    const victim = await file.docket.enqueue("t", {}, { queue: "banner-cancel" });
    const other = await file.docket.enqueue("t", {}, { queue: "banner-cancel" });
    const csrf = await tokenOf(handler);
    const cancelled = await handler(new Request(`http://127.0.0.1/jobs/${victim.id}/cancel`, { method: "POST", headers: { ...FORM, origin: "http://127.0.0.1" }, body: `csrf=${csrf}` }));
    const signed = new URL(cancelled.headers.get("location")!, "http://127.0.0.1");
    expect(signed.searchParams.get("sig")).toBeTruthy();
    expect(banner(await get(`${signed.pathname}${signed.search}`))).toBeTruthy();
    expect(banner(await get(`/jobs/${other.id}${signed.search}`))).toBeUndefined();
    const miss = await handler(new Request("http://127.0.0.1/lookup?q=no-such-key"));
    const missPage = await miss.text();
    expect(banner(missPage)).toBe("no job with that id or idempotency key");
    expect(missPage).toContain('value="no-such-key"');
  });

  it("text that could deceive an operator (bidi overrides, controls) shows as escapes in pages; form fields keep the exact value, so a bulk action posts back the queue it was given", async () => {
    const queue = "bidi\u202eq";
    const job = await file.docket.enqueue("report\u202efdp.exe", { y: "\u202eRTL", bell: "\u0007" }, { queue });
    const handler = file.docket.dashboard({ authorize: () => true });
    const get = async (path: string) => (await handler(new Request(`http://127.0.0.1${path}`))).text();
    const list = await get(`/jobs?queue=${encodeURIComponent(queue)}`);
    expect(list).toContain("<td>report\\u202efdp.exe</td>");
    // Raw only in the filter box's value (links carry it percent-encoded).
    expect([...list.matchAll(/.{0,30}\u202e.{0,10}/g)].map((m) => m[0])).toEqual(['input name="queue" value="bidi\u202eq" size="1']);
    const page = await get(`/jobs/${job.id}`);
    expect(page).toContain("\\u202eRTL");
    expect(page).not.toMatch(/[\u202e\u0007]/);
    const confirm = await get(`/jobs/bulk?${new URLSearchParams({ state: "ready", queue, action: "cancel" })}`);
    expect(confirm).toContain(`<input type="hidden" name="queue" value="${queue}">`);
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(confirm)![1]!;
    const r = await handler(new Request("http://127.0.0.1/jobs/bulk", { method: "POST", headers: { ...FORM, origin: "http://127.0.0.1" }, body: new URLSearchParams({ csrf, action: "cancel", state: "ready", queue, expected: "1" }).toString() }));
    expect(r.status).toBe(303);
    expect((await file.docket.get(job.id))?.state).toBe("cancelled");
  });

  it("lookup: a number that is one job's id and another's idempotency key offers both; one match redirects to it", async () => {
    const handler = file.docket.dashboard({ authorize: () => true });
    const first = await file.docket.enqueue("t", {}, { queue: "lookup" });
    const keyed = await file.docket.enqueue("t", {}, { queue: "lookup", idempotencyKey: String(first.id) });
    const both = await handler(new Request(`http://127.0.0.1/lookup?q=${first.id}`));
    expect(both.status).toBe(200);
    const links = [...(await both.text()).matchAll(/<li><a href="\/jobs\/(\d+)">/g)].map((m) => Number(m[1]));
    expect(links).toEqual([first.id, keyed.id]);
    const onlyKey = await file.docket.enqueue("t", {}, { queue: "lookup", idempotencyKey: "999999" });
    const one = await handler(new Request("http://127.0.0.1/lookup?q=999999"));
    expect([one.status, one.headers.get("location")]).toEqual([303, `/jobs/${onlyKey.id}`]);
  });

  it("allowedHosts: a Host not listed is refused with 421 before anything else; listed names pass on any port, name:port entries on that port only", async () => {
    const handler = file.docket.dashboard({ allowedHosts: ["ops.example.com", "127.0.0.1:8080"] });
    const status = async (host: string) => (await handler(new Request("http://x/", { headers: { host } }))).status;
    expect(await status("evil.example")).toBe(421);
    expect(await status("evil.example:8080")).toBe(421);
    expect(await status("127.0.0.1:9090")).toBe(421);
    expect(await status("OPS.example.com.")).toBe(200);
    expect(await status("ops.example.com:8443")).toBe(200);
    expect(await status("127.0.0.1:8080")).toBe(200);
  });

  it("a POST body over maxBodyBytes is refused with 413 before its form is parsed", async () => {
    const handler = file.docket.dashboard({ authorize: () => true, maxBodyBytes: 1024 });
    const csrf = await tokenOf(handler);
    const big = await handler(new Request("http://127.0.0.1/queues/q/pause", { method: "POST", headers: { ...FORM, origin: "http://127.0.0.1" }, body: `csrf=${csrf}&pad=${"x".repeat(2048)}` }));
    expect(big.status).toBe(413);
    const byDefault = file.docket.dashboard({ authorize: () => true });
    const huge = await byDefault(new Request("http://127.0.0.1/queues/q/pause", { method: "POST", headers: { ...FORM, origin: "http://127.0.0.1" }, body: `csrf=${await tokenOf(byDefault)}&pad=${"x".repeat(100_000)}` }));
    expect(huge.status).toBe(413);
  });

  it("buttons only for what authorize allows; a refusal renders inside the layout with a way back", async () => {
    await file.docket.enqueue("t", {}, { queue: "perms" });
    const buttons = async (handler: DashboardHandler) => [...(await (await handler(new Request("http://127.0.0.1/"))).text()).matchAll(/data-action="([a-z-]+)"/g)].map((m) => m[1]);
    // The default: viewing only, so no mutation button at all (no form to be refused).
    const byDefault = file.docket.dashboard({ secret: SECRET });
    expect(await buttons(byDefault)).toEqual([]);
    const pauseOnly = file.docket.dashboard({ secret: SECRET, authorize: (_r, a) => a === "view" || a === "pause" });
    expect(new Set(await buttons(pauseOnly))).toEqual(new Set(["pause"]));
    // A POST the default refuses (a token from a handler with the same secret): a page in the layout, with a link back.
    const csrf = await tokenOf(pauseOnly);
    const refused = await byDefault(new Request("http://127.0.0.1/queues/perms/pause", { method: "POST", headers: { ...FORM, origin: "http://127.0.0.1" }, body: `csrf=${csrf}` }));
    expect(refused.status).toBe(403);
    const text = await refused.text();
    expect(text).toContain("<header>");
    expect(text).toContain("This action is not allowed for you here.");
    expect(text).toMatch(/<p><a href="\/">Back<\/a><\/p>/);
    expect(await paused("perms")).toBe(false);
  });

  it("replay all: the dead page states the exact count, the bulk replay asks for confirmation with it, and a bare POST replays nothing", async () => {
    const d = file.docket;
    const dead: number[] = [];
    for (let i = 0; i < 3; i++) dead.push((await d.enqueue("doomed", { i }, { queue: "bulk", maxAttempts: 1 })).id);
    const w = d.worker({ queues: ["bulk"], pollMs: 10, logger: null, handlers: { doomed: async () => Promise.reject(new Error("no")) } });
    await w.start();
    for (const id of dead) await d.waitFor(id, { timeoutMs: 10_000, pollMs: 10 });
    await w.stop();
    const total = (await d.stats()).queues.reduce((n, q) => n + q.counts.dead, 0);
    const handler = file.docket.dashboard({ authorize: () => true });
    const deadPage = await (await handler(new Request("http://127.0.0.1/dead"))).text();
    expect(deadPage).toContain(`${total} dead job(s)`);
    expect(deadPage).toContain(`Replay all ${total}…`);
    const confirm = await (await handler(new Request("http://127.0.0.1/dead/replay-all"))).text();
    expect(confirm).toContain(`Replay all <strong>${total}</strong> dead job(s)?`);
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(confirm)![1]!;
    const post = (body: string) => handler(new Request("http://127.0.0.1/dead/replay-all", { method: "POST", headers: { ...FORM, origin: "http://127.0.0.1" }, body }));
    const bare = await post(`csrf=${csrf}`);
    expect([bare.status, bare.headers.get("location")]).toEqual([303, "/dead/replay-all"]);
    expect((await d.deadLetters.list()).length).toBe(total);
    // The count confirmed bounds the replay (more jobs may have died since the page): at most that many; a count that is no count replays nothing.
    for (const bad of ["abc", "1e1", "-1", ""]) expect((await post(`csrf=${csrf}&expected=${encodeURIComponent(bad)}`)).status, bad).toBe(400);
    expect((await d.deadLetters.list()).length).toBe(total);
    expect((await post(`csrf=${csrf}&expected=${total - 1}`)).status).toBe(303);
    expect((await d.deadLetters.list()).length).toBe(1);
    const confirmed = await post(`csrf=${csrf}&expected=1`);
    expect(confirmed.status).toBe(303);
    expect((await d.deadLetters.list()).length).toBe(0);
    for (const id of dead) expect((await d.get(id))?.state).not.toBe("dead");
  });
});
