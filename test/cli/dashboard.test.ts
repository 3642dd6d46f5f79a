import { execFile, execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { createServer, request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openUrl } from "../../src/cli/open.ts";
import { Docket } from "../../src/client/docket.ts";
import { BIN, NODE } from "../support/cli.ts";

/**
 * `docket dashboard` run as a user runs it (a child process): only Hosts
 * naming its address are served (DNS rebinding), every request needs the
 * password it prints, and a huge POST is refused with 413 without the
 * process buffering it.
 */
const dir = mkdtempSync(join(tmpdir(), "docket-cli-dash-"));
const dbUrl = `sqlite:${join(dir, "dash.db")}`;
const CHROMIUM = (() => {
  try {
    return execFileSync("sh", ["-c", "command -v chromium || command -v chromium-browser"], { encoding: "utf8" }).trim() || null;
  } catch {
    return null;
  }
})();
if (CHROMIUM === null) console.warn("!! SKIPPING the Chromium case of test/cli/dashboard.test.ts: no chromium binary on PATH");

interface Served {
  child: ChildProcess;
  port: number;
  /** The process that listens (tsx runs the CLI in a child node process). */
  pid: number;
  password: string | null;
}

let served: Served;

/** The pid whose open files include the socket listening on 127.0.0.1:`port` (from /proc/net/tcp). */
function listeningPid(port: number): number {
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  const line = readFileSync("/proc/net/tcp", "utf8").split("\n").find((l) => {
    const f = l.trim().split(/\s+/);
    return f[1] === `0100007F:${hexPort}` && f[3] === "0A";
  });
  const inode = line?.trim().split(/\s+/)[9];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      for (const fd of readdirSync(`/proc/${name}/fd`)) if (readlinkSync(`/proc/${name}/fd/${fd}`) === `socket:[${inode}]`) return Number(name);
    } catch {
      // not ours to read, or exited meanwhile
    }
  }
  throw new Error(`no process listens on 127.0.0.1:${port}`);
}

function rssKb(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return { rss: Number(/VmRSS:\s+(\d+)/.exec(status)![1]), hwm: Number(/VmHWM:\s+(\d+)/.exec(status)![1]) };
}

beforeAll(async () => {
  await new Promise<void>((done, fail) => execFile(NODE, [BIN, "migrate", "--url", dbUrl], (e) => (e ? fail(e) : done())));
  const env = { ...process.env, DOCKET_URL: "" };
  delete env.DOCKET_DASHBOARD_TOKEN;
  const child = spawn(NODE, [BIN, "dashboard", "--port", "0", "--url", dbUrl], { stdio: ["ignore", "pipe", "pipe"], env });
  const out = await new Promise<string>((done, fail) => {
    let text = "";
    const timer = setTimeout(() => fail(new Error(`no URL printed within 30 s: ${text}`)), 30_000);
    child.stdout.on("data", (d) => {
      text += d;
      // Wait for the whole banner: the URL line, then (when authentication is on) the password line.
      if (/dashboard on http:\/\/127\.0\.0\.1:\d+\/.*\n(?:.*\n)?/.test(text) && (!/pid \d+/.test(text) || /password|authentication/.test(text))) {
        clearTimeout(timer);
        done(text);
      }
    });
    child.on("exit", (code) => fail(new Error(`exited ${code} before serving: ${text}`)));
  });
  console.log(`docket dashboard printed:\n${out.replace(/password \S+/, "password <redacted>")}`);
  const port = Number(/127\.0\.0\.1:(\d+)\//.exec(out)![1]);
  // tsx runs the CLI in a child node process: the one that owns the listening socket.
  const pid = listeningPid(port);
  const printedPid = /pid (\d+)/.exec(out)?.[1];
  if (printedPid !== undefined) expect(Number(printedPid)).toBe(pid);
  served = { child, port, pid, password: /password (\S+) \(generated/.exec(out)?.[1] ?? null };
}, 60_000);

afterAll(async () => {
  if (served?.child.exitCode === null) {
    const exited = new Promise((r) => served.child.once("exit", r));
    served.child.kill("SIGINT");
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

function basic(password: string | null): Record<string, string> {
  return password === null ? {} : { authorization: `Basic ${Buffer.from(`docket:${password}`).toString("base64")}` };
}

/** A GET with the given headers (Host included); resolves with status and body. */
function get(headers: Record<string, string>, path = "/"): Promise<{ status: number; text: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port: served.port, path, headers }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d)).on("end", () => resolve({ status: res.statusCode!, text, headers: res.headers }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("docket dashboard (CLI child process)", () => {
  it("refuses a Host that does not name its address (DNS rebinding), asks for credentials (401), and serves with them (200)", async () => {
    const port = served.port;
    const rebound = await get({ host: `evil.example:${port}`, ...basic(served.password) });
    console.log(`GET / with Host evil.example:${port}: ${rebound.status} ${rebound.text.slice(0, 40)}`);
    expect(rebound.status).toBe(421);
    expect(rebound.text).not.toContain("docket</strong>");
    const anonymous = await get({ host: `127.0.0.1:${port}` });
    console.log(`GET / with Host 127.0.0.1:${port}, no credentials: ${anonymous.status} (www-authenticate: ${anonymous.headers["www-authenticate"]})`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers["www-authenticate"]).toMatch(/^Basic /);
    expect((await get({ host: `127.0.0.1:${port}`, authorization: `Basic ${Buffer.from("docket:wrong-password").toString("base64")}` })).status).toBe(401);
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]) {
      const ok = await get({ host, ...basic(served.password) });
      console.log(`GET / with Host ${host} and the password: ${ok.status}`);
      expect(ok.status).toBe(200);
      expect(ok.text).toContain("<title>Overview · docket</title>");
    }
    expect((await get({ host: `127.0.0.1:${port}`, authorization: `Bearer ${served.password}` })).status).toBe(200);
  }, 60_000);

  it("refuses a 300 MB POST with 413: by Content-Length without reading it, and a chunked one once it passes the cap, its RSS growing by < 50 MB", async () => {
    const before = rssKb(served.pid);
    console.log(`child pid ${served.pid} before: VmRSS ${(before.rss / 1024).toFixed(1)} MB`);
    const headers = { host: `127.0.0.1:${served.port}`, "content-type": "application/x-www-form-urlencoded", ...basic(served.password) };
    // Chunked, generated 64 KiB at a time: stops when the answer comes (or the server closes).
    const chunk = Buffer.alloc(64 * 1024, "a");
    const total = 300 * 1024 * 1024;
    const started = Date.now();
    const { status, sent } = await new Promise<{ status: number | string; sent: number }>((resolve) => {
      let sent = 0;
      let answered: number | null = null;
      const req = httpRequest({ host: "127.0.0.1", port: served.port, method: "POST", path: "/queues/q/pause", headers: { ...headers, "transfer-encoding": "chunked" } }, (res) => {
        answered = res.statusCode!;
        res.resume();
        res.on("end", () => (req.destroy(), resolve({ status: answered!, sent })));
      });
      req.on("error", (e) => resolve({ status: answered ?? `error ${e.message}`, sent }));
      const pump = () => {
        while (answered === null && sent < total) {
          sent += chunk.length;
          if (!req.write(chunk)) return void req.once("drain", pump);
        }
        if (sent >= total) req.end();
      };
      pump();
    });
    await new Promise((r) => setTimeout(r, 1_000));
    const after = rssKb(served.pid);
    const grownMb = (after.rss - before.rss) / 1024;
    console.log(
      `chunked 300 MB POST: ${status} after ${(sent / 1024 / 1024).toFixed(1)} MB sent in ${Date.now() - started} ms; ` +
        `child pid ${served.pid} VmRSS ${(before.rss / 1024).toFixed(1)} MB -> ${(after.rss / 1024).toFixed(1)} MB (+${grownMb.toFixed(1)} MB), ` +
        `VmHWM ${(before.hwm / 1024).toFixed(1)} MB -> ${(after.hwm / 1024).toFixed(1)} MB`,
    );
    // Declared 300 MB, nothing sent: answered at once.
    const declared = await new Promise<number | string>((resolve) => {
      const req = httpRequest({ host: "127.0.0.1", port: served.port, method: "POST", path: "/queues/q/pause", headers: { ...headers, "content-length": String(300 * 1024 * 1024) } }, (res) => {
        resolve(res.statusCode!);
        res.resume();
        req.destroy();
      });
      req.on("error", () => undefined);
      const timer = setTimeout(() => (resolve("no answer within 5 s"), req.destroy()), 5_000);
      req.on("close", () => clearTimeout(timer));
      req.flushHeaders();
    });
    console.log(`POST with Content-Length 300 MB: ${declared}`);
    expect(status).toBe(413);
    expect(grownMb).toBeLessThan(50);
    expect(declared).toBe(413);
    expect((await get({ host: `127.0.0.1:${served.port}`, ...basic(served.password) })).status).toBe(200);
  }, 300_000);

  it.skipIf(CHROMIUM === null)("in Chromium: a rebound name (evil.example resolved to 127.0.0.1) gets 421; without credentials 401; with them the page renders and a pause works", async () => {
    const d = new Docket({ adapter: await openUrl(dbUrl, undefined) });
    await d.enqueue("t", {}, { queue: "mail" });
    await d.close();
    const browser = await chromium.launch({ executablePath: CHROMIUM!, args: ["--no-sandbox", "--host-resolver-rules=MAP evil.example 127.0.0.1"] });
    try {
      const anonymous = await browser.newPage();
      // Headless Chromium answers the Basic challenge by failing the navigation (there is no prompt to show).
      const denied = await anonymous.goto(`http://127.0.0.1:${served.port}/`).then((r) => String(r?.status()), (e: Error) => e.message.split("\n")[0]!);
      console.log(`Chromium, no credentials: ${denied}`);
      expect(denied).toMatch(/^401$|ERR_INVALID_AUTH_CREDENTIALS/);
      const context = await browser.newContext({ httpCredentials: { username: "docket", password: served.password ?? "" } });
      const page = await context.newPage();
      const rebound = await page.goto(`http://evil.example:${served.port}/`);
      console.log(`Chromium, http://evil.example:${served.port}/ (resolved to 127.0.0.1): ${rebound?.status()} ${await page.textContent("body")}`);
      expect(rebound?.status()).toBe(421);
      const ok = await page.goto(`http://127.0.0.1:${served.port}/`);
      console.log(`Chromium, http://127.0.0.1:${served.port}/ with credentials: ${ok?.status()}`);
      expect(ok?.status()).toBe(200);
      await page.click("#queues tr[data-queue=mail] button[data-action=pause]");
      expect(await page.textContent("[role=status]")).toBe("queue mail paused");
    } finally {
      await browser.close();
    }
  }, 120_000);

  it("--host binds another address (its Host is served, with the password); --no-auth beside a non-loopback --host is a usage error that serves nothing", async () => {
    const env = { ...process.env, DOCKET_URL: "", DOCKET_DASHBOARD_TOKEN: "a password for the test" };
    const refused = await new Promise<{ code: number | null; err: string }>((done) => {
      execFile(NODE, [BIN, "dashboard", "--port", "0", "--host", "0.0.0.0", "--no-auth", "--url", dbUrl], { env }, (e, _out, err) => done({ code: (e as { code?: number } | null)?.code ?? 0, err }));
    });
    expect(refused.code).toBe(2);
    expect(refused.err).toContain("--no-auth serves the queue to anyone who can reach 0.0.0.0");
    const child = spawn(NODE, [BIN, "dashboard", "--port", "0", "--host", "127.0.0.2", "--url", dbUrl], { stdio: ["ignore", "pipe", "pipe"], env });
    try {
      const out = await new Promise<string>((done, fail) => {
        let text = "";
        const timer = setTimeout(() => fail(new Error(`no URL printed within 30 s: ${text}`)), 30_000);
        child.stdout.on("data", (d) => {
          text += d;
          if (/password/.test(text)) (clearTimeout(timer), done(text));
        });
      });
      const port = Number(/dashboard on http:\/\/127\.0\.0\.2:(\d+)\//.exec(out)![1]);
      const page = await new Promise<number>((done, fail) => {
        const req = httpRequest({ host: "127.0.0.2", port, path: "/", headers: { host: `127.0.0.2:${port}`, ...basic("a password for the test") } }, (res) => (res.resume(), done(res.statusCode!)));
        req.on("error", fail);
        req.end();
      });
      expect(page).toBe(200);
    } finally {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGINT");
      await exited;
    }
  }, 60_000);

  it("a port already in use: serveOnNode rejects with EADDRINUSE (nothing left open), and docket dashboard says so and exits 1, with no stack trace", async () => {
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, "127.0.0.1", r));
    const port = (taken.address() as AddressInfo).port;
    try {
      const { serveOnNode } = await import("../../src/dashboard/node.ts");
      await expect(serveOnNode(() => new Response("no"), port)).rejects.toMatchObject({ code: "EADDRINUSE" });
      const env = { ...process.env, DOCKET_URL: "", DOCKET_DASHBOARD_TOKEN: "a password for the test" };
      const ran = await new Promise<{ code: number | null; err: string }>((done) => {
        execFile(NODE, [BIN, "dashboard", "--port", String(port), "--url", dbUrl], { env, timeout: 30_000 }, (e, _out, err) => done({ code: (e as { code?: number } | null)?.code ?? 0, err }));
      });
      expect(ran.code).toBe(1);
      expect(ran.err.trim()).toBe(`docket: cannot serve the dashboard on 127.0.0.1:${port}: the port is in use (another dashboard, or another server)`);
    } finally {
      await new Promise((r) => taken.close(r));
    }
  }, 60_000);
});
