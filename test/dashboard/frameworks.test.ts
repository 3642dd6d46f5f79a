import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import express from "express";
import { Hono } from "hono";
import { beforeAll, describe, expect, it } from "vitest";
import type { DashboardHandler } from "../../src/dashboard/index.ts";
import { nodeListener } from "../../src/dashboard/node.ts";
import { sqliteDocketForFile } from "../support/sqlite-docket.ts";

/**
 * The dashboard handler mounted in Express (over real HTTP,
 * with and without a global body parser) and in Hono (its fetch API), under
 * a base path: pages render, a CSRF-protected POST replays a dead job once,
 * a POST without the token is refused.
 */
const file = sqliteDocketForFile();


async function deadJob(): Promise<number> {
  const job = await file.docket.enqueue("charge", { cents: 5 }, { queue: "billing", maxAttempts: 1 });
  const w = file.docket.worker({ queues: ["billing"], pollMs: 10, logger: null, handlers: { charge: () => Promise.reject(new Error("card declined")) } });
  await w.start();
  await file.docket.waitFor(job.id, { timeoutMs: 10_000, pollMs: 10 });
  await w.stop();
  return job.id;
}

/** GETs the dead letters page, then POSTs its replay form for `id` (with `csrf` unless told not to). */
async function replayThrough(fetcher: (path: string, init?: RequestInit) => Promise<Response>, origin: string, id: number, withToken = true) {
  const list = await fetcher("/ops/dead");
  expect(list.status).toBe(200);
  const html = await list.text();
  expect(html).toContain("card declined");
  const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(html)?.[1];
  expect(csrf).toBeTruthy();
  const body = new URLSearchParams(withToken ? { csrf: csrf! } : {});
  return fetcher(`/ops/dead/${id}/replay`, {
    method: "POST",
    redirect: "manual",
    headers: { origin, "content-type": "application/x-www-form-urlencoded" },
    body: body.toString(),
  });
}

async function listen(app: express.Express): Promise<string> {
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  file.onClose(() => new Promise((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("dashboard in web frameworks", () => {
  let handler: DashboardHandler;
  beforeAll(() => void (handler = file.docket.dashboard({ basePath: "/ops/", authorize: () => true })));

  for (const bodyParser of [false, true]) {
    it(`Express ${bodyParser ? "with a global urlencoded() body parser" : "without a body parser"}: renders under /ops, replays with the token, refuses without it`, async () => {
      const app = express();
      if (bodyParser) app.use(express.urlencoded({ extended: false }));
      app.get("/", (_req, res) => void res.send("the app's own page"));
      app.use("/ops", nodeListener(handler));
      const url = await listen(app);
      const fetcher = (path: string, init?: RequestInit) => fetch(`${url}${path}`, init);
      expect(await (await fetcher("/")).text()).toBe("the app's own page");
      const overview = await fetcher("/ops/");
      expect(overview.status).toBe(200);
      expect(await overview.text()).toContain("<h2>Queues</h2>");
      const id = await deadJob();
      expect((await replayThrough(fetcher, url, id, false)).status).toBe(403);
      expect((await file.docket.get(id))?.state).toBe("dead");
      const replayed = await replayThrough(fetcher, url, id);
      expect(replayed.status).toBe(303);
      expect(replayed.headers.get("location")).toMatch(/^\/ops\/dead\?notice=job\+\d+\+replayed&sig=[0-9a-f]{32}$/);
      expect((await file.docket.get(id))?.attempt).toBe(0);
      const detail = await (await fetcher(`/ops/jobs/${id}`)).text();
      expect(detail).toContain('id="errors"');
      expect(detail).toContain("card declined");
      await file.docket.cancel(id);
    });
  }

  it("Hono: app.all('/ops/*') passing c.req.raw renders, replays with the token, refuses without it", async () => {
    const app = new Hono();
    app.get("/", (c) => c.text("the app's own page"));
    app.all("/ops/*", (c) => handler(c.req.raw));
    const origin = "http://hono.test";
    const fetcher = async (path: string, init?: RequestInit) => app.request(`${origin}${path}`, init);
    expect(await (await fetcher("/")).text()).toBe("the app's own page");
    expect((await fetcher("/ops/")).status).toBe(200);
    const id = await deadJob();
    expect((await replayThrough(fetcher, origin, id, false)).status).toBe(403);
    expect((await replayThrough(fetcher, "http://evil.test", id)).status).toBe(403);
    expect((await file.docket.get(id))?.state).toBe("dead");
    const replayed = await replayThrough(fetcher, origin, id);
    expect(replayed.status).toBe(303);
    expect((await file.docket.get(id))?.attempt).toBe(0);
    await file.docket.cancel(id);
  });

  it('basePath "/ops" (no trailing slash, as Express, Hono and Bull Board mount): /ops and /ops/ render with links under /ops/, in Express and Hono', async () => {
    const noSlash = file.docket.dashboard({ basePath: "/ops", authorize: () => true });
    const app = express();
    app.use("/ops", nodeListener(noSlash));
    const url = await listen(app);
    const hono = new Hono();
    hono.all("/ops", (c) => noSlash(c.req.raw));
    hono.all("/ops/*", (c) => noSlash(c.req.raw));
    const fetchers: [string, string, (path: string, init?: RequestInit) => Promise<Response>][] = [
      ["Express", url, (path, init) => fetch(`${url}${path}`, init)],
      ["Hono", "http://hono.test", async (path, init) => hono.request(`http://hono.test${path}`, init)],
    ];
    for (const [name, origin, fetcher] of fetchers) {
      for (const path of ["/ops", "/ops/"]) {
        const r = await fetcher(path);
        expect(r.status, `${name} GET ${path}`).toBe(200);
        const page = await r.text();
        expect(page).toContain('<a href="/ops/dead">');
        expect(page).toContain('action="/ops/lookup"');
      }
      const id = await deadJob();
      const replayed = await replayThrough(fetcher, origin, id);
      expect(replayed.status, `${name} replay`).toBe(303);
      expect(replayed.headers.get("location")).toMatch(/^\/ops\/dead\?notice=/);
      await file.docket.cancel(id);
    }
    expect(file.docket.dashboard({ basePath: "/ops/" })).toBeTypeOf("function");
    expect(() => file.docket.dashboard({ basePath: "ops" })).toThrow(/basePath must be a path starting with "\/"/);
  });
});
