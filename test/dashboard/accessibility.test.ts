import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { mkdirSync, readFileSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Docket } from "../../src/client/docket.ts";
import { serveOnNode } from "../../src/dashboard/node.ts";
import { REQUIRE_ALL, openTarget, type DisposableTarget } from "../support/targets.ts";

/**
 * Every dashboard page, checked by axe-core (WCAG 2.1 A and AA rules) in
 * headless Chromium: no violation of impact "serious" or "critical". axe is
 * injected with the page's Content-Security-Policy bypassed (the dashboard
 * itself runs no script). SQLite stands for every adapter: the pages are the same.
 */
const CHROMIUM = (() => {
  try {
    return execFileSync("sh", ["-c", "command -v chromium || command -v chromium-browser"], { encoding: "utf8" }).trim() || null;
  } catch {
    return null;
  }
})();
if (!CHROMIUM) {
  if (REQUIRE_ALL) throw new Error("DOCKET_REQUIRE_ALL_ADAPTERS=1 but no chromium binary was found (apt-get install -y chromium)");
  console.warn(`\n${"!".repeat(78)}\n!! SKIPPING the dashboard accessibility check: no chromium binary on PATH\n${"!".repeat(78)}\n`);
}
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

let browser: Browser | null = null;
let target: DisposableTarget | null = null;
beforeAll(async () => {
  if (CHROMIUM) browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  target = await openTarget("sqlite");
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await target?.dispose();
});

interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

describe("dashboard accessibility (axe-core)", () => {
  it("overview, job list, job, dead letters, replay-all confirmation, lookup miss, a refusal, workers, a bulk confirmation, controls and an error search: no serious or critical violation", async (ctx) => {
    if (!browser || !target) return ctx.skip();
    const store = await target.open();
    const adapter = await store.connect();
    await adapter.migrate();
    const docket = new Docket({ adapter, retry: { baseMs: 5, jitter: 0 } });
    const job = await docket.enqueue("email", { to: "a@example.com" }, { queue: "mail", concurrency: { key: "account-7", limit: 1 } });
    await docket.setQueueCap("mail", 3);
    await docket.setTaskCap("email", 2);
    await docket.schedules.put("nightly", { cron: "0 3 * * *", task: "report" });
    const dead = await docket.enqueue("charge", {}, { queue: "billing", maxAttempts: 1 });
    const w = docket.worker({ queues: ["billing"], pollMs: 20, logger: null, handlers: { charge: () => Promise.reject(new Error("declined")) } });
    await w.start();
    await docket.waitFor(dead.id, { timeoutMs: 10_000, pollMs: 20 });
    await w.stop();
    // A worker left running for the workers page (it takes from a queue nothing is enqueued to).
    const idle = docket.worker({ name: "idle-worker", queues: ["idle"], concurrency: 4, pollMs: 50, logger: null, handlers: { nothing: () => undefined } });
    await idle.start();
    const { server, url } = await serveOnNode(docket.dashboard({ authorize: (_r, a) => a !== "cancel" }), 0);
    const context = await browser.newContext({ bypassCSP: true });
    const page = await context.newPage();
    const found: string[] = [];
    try {
      for (const path of ["", "jobs", "jobs?state=ready&queue=mail", `jobs/${job.id}`, `jobs/${dead.id}`, "dead", "dead/replay-all", "lookup?q=nothing", "jobs?state=bogus", "workers", "jobs?state=dead", "jobs/bulk?action=replay&state=dead", "controls", "jobs?errorContains=declined"]) {
        await page.goto(`${url}${path}`);
        const shot = { workers: "workers", "jobs/bulk?action=replay&state=dead": "bulk-confirmation", [`jobs/${dead.id}`]: "job-actions", "jobs?errorContains=declined": "error-search" }[path];
        if (shot) {
          mkdirSync("test-artifacts", { recursive: true });
          await page.screenshot({ path: `test-artifacts/dashboard-sqlite-${shot}.png`, fullPage: true });
        }
        await page.addScriptTag({ content: AXE });
        const violations = (await page.evaluate(async () => {
          const result = await (globalThis as unknown as { axe: { run(o: object): Promise<{ violations: unknown[] }> } }).axe.run({ runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } });
          return result.violations;
        })) as Violation[];
        for (const v of violations) {
          const line = `/${path}: ${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`;
          console.log(line);
          if (v.impact === "serious" || v.impact === "critical") found.push(line);
        }
      }
    } finally {
      await context.close();
      await idle.stop();
      await new Promise<void>((r) => server.close(() => r()));
      await adapter.close();
      await store.close();
    }
    expect(found).toEqual([]);
  }, 120_000);
});
