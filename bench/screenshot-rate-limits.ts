/**
 * Screenshot of the dashboard overview with rate limits in use, for the docs.
 *   cd /work/main && npx tsx bench/screenshot-rate-limits.ts
 * Writes docs/dashboard-rate-limits.png. Needs Debian's chromium (apt-get install -y chromium).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chromium } from "playwright-core";
import { Docket } from "../src/index.ts";
import { sqliteAdapter } from "../src/adapters/sqlite/index.ts";
import { serveOnNode } from "../src/dashboard/node.ts";

const OUT = resolve("docs/dashboard-rate-limits.png");
const CHROMIUM = execFileSync("sh", ["-c", "command -v chromium || command -v chromium-browser || true"], { encoding: "utf8" }).trim();
if (!CHROMIUM) throw new Error("no chromium binary on PATH (apt-get install -y chromium)");

const dir = mkdtempSync(join(tmpdir(), "docket-shot-"));
const docket = new Docket({ adapter: sqliteAdapter({ filename: join(dir, "jobs.db") }) });
await docket.migrate();

await docket.setQueueRateLimit("emails", { limit: 100, periodMs: 60_000 });
await docket.setTaskRateLimit("stripe.charge", { limit: 25, periodMs: 1_000 });
for (let i = 0; i < 150; i++) await docket.enqueue("email.send", { to: `user${i}@example.com` }, { queue: "emails" });
for (let i = 0; i < 120; i++) await docket.enqueue("stripe.charge", { cents: 100 + i }, { queue: "payments" });
for (let i = 0; i < 20; i++) await docket.enqueue("crm.sync", { i }, { queue: "sync", rateLimit: { key: "tenant:acme", limit: 10, periodMs: 60_000 } });
for (let i = 0; i < 10; i++) await docket.enqueue("crm.sync", { i }, { queue: "sync", rateLimit: { key: "tenant:globex", limit: 5, periodMs: 60_000 } });

const work = () => new Promise<void>((r) => setTimeout(r, 50));
const worker = docket.worker({
  name: "shot-1",
  queues: ["emails", "payments", "sync"],
  concurrency: 20,
  pollMs: 50,
  logger: null,
  handlers: { "email.send": work, "stripe.charge": work, "crm.sync": work },
});
const { server, url } = await serveOnNode(docket.dashboard({ readOnly: true, authorize: () => true }), 0);
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
await worker.start();
try {
  // Let the worker run ~3 s, then shoot while it is still running: the 1 s task window is only visible live.
  await new Promise((r) => setTimeout(r, 3_000));
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  await page.goto(url);
  await page.waitForSelector("#rate-limits");
  console.log((await page.textContent("#rate-limits"))?.replace(/\s+/g, " "));
  mkdirSync(resolve("docs"), { recursive: true });
  await page.screenshot({ path: OUT, fullPage: true });
  console.log(`wrote ${OUT}`);
} finally {
  await worker.stop();
  await browser.close();
  await new Promise<void>((r) => server.close(() => r()));
  await docket.close();
  rmSync(dir, { recursive: true, force: true });
}
