import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { resolve } from "node:path";
import { chromium } from "playwright-core";
import { describe, expect, it } from "vitest";
import { Docket } from "../../src/index.ts";
import { memoryAdapter } from "../../src/memory.ts";
import { serveOnNode } from "../../src/dashboard/node.ts";
import { REQUIRE_ALL } from "../support/targets.ts";

const CHROMIUM = (() => {
  try {
    return execFileSync("sh", ["-c", "command -v chromium || command -v chromium-browser"], { encoding: "utf8" }).trim() || null;
  } catch {
    return null;
  }
})();

/** A diamond of jobs, the first parent done, the second running: the join waits for both. */
async function diamond() {
  const docket = new Docket({ adapter: memoryAdapter() });
  await docket.migrate();
  const [a, b, c, join] = await docket.enqueueMany([
    { task: "order.validate", payload: {}, ref: "a" },
    { task: "card.charge", payload: {}, ref: "b", options: { after: [{ ref: "a" }] } },
    { task: "pdf.<render>", payload: {}, ref: "c", options: { after: [{ ref: "a" }] } },
    { task: "invoice.send", payload: {}, options: { after: [{ ref: "b" }, { ref: "c" }] } },
  ]);
  const w = docket.worker({ pollMs: 5, logger: null, handlers: { "order.validate": () => "ok" } });
  await w.start();
  await docket.waitFor(a!.id, { timeoutMs: 5_000, pollMs: 5 });
  await w.stop();
  return { docket, a: a!, b: b!, c: c!, join: join! };
}

/** The job page draws a job's parents and children (EnqueueOptions.after), each a link with its state. */
describe("dashboard job page: dependencies", () => {
  it("shows parents and children with their states, escaped, and says so when there are none", async () => {
    const { docket, a, b, c, join } = await diamond();
    const handler = docket.dashboard({ authorize: () => true });
    const page = async (id: number) => (await handler(new Request(`http://127.0.0.1/jobs/${id}`))).text();
    const middle = await page(b.id);
    expect(middle).toMatch(new RegExp(`id="parents".*data-job="${a.id}".*order\\.validate<br><small>succeeded`, "s"));
    expect(middle).toMatch(new RegExp(`id="children".*data-job="${join.id}".*invoice\\.send<br><small>waiting`, "s"));
    expect(await page(join.id)).toContain("pdf.&lt;render&gt;");
    expect(await page(c.id)).not.toContain("<render>");
    const lone = await docket.enqueue("lone", {});
    expect(await page(lone.id)).toContain("No parents or children.");
  });

  it("in Chromium: the graph renders, and a node leads to its job (screenshot in test-artifacts)", async (ctx) => {
    if (!CHROMIUM) {
      if (REQUIRE_ALL) throw new Error("DOCKET_REQUIRE_ALL_ADAPTERS=1 but no chromium binary was found (apt-get install -y chromium)");
      return ctx.skip();
    }
    const { docket, a, b, join } = await diamond();
    const { server, url } = await serveOnNode(docket.dashboard({ authorize: () => true }), 0);
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    try {
      const tab = await browser.newPage({ viewport: { width: 1000, height: 700 } });
      await tab.goto(`${url}jobs/${b.id}`);
      expect(await tab.textContent("#parents")).toContain(`#${a.id} order.validate`);
      expect(await tab.textContent("#children")).toContain(`#${join.id} invoice.send`);
      mkdirSync(resolve("test-artifacts"), { recursive: true });
      await tab.locator(".graph").screenshot({ path: resolve("test-artifacts/dashboard-graph.png") });
      await tab.click(`#children a[data-job="${join.id}"]`);
      expect(await tab.textContent("h1")).toBe(`Job #${join.id}`);
      expect(await tab.textContent("#parents")).toMatch(/card\.charge\s*(scheduled|ready).*pdf\.<render>\s*(scheduled|ready)/s);
      await tab.screenshot({ path: resolve("test-artifacts/dashboard-graph-join.png"), fullPage: true });
    } finally {
      await browser.close();
      server.close();
    }
  }, 60_000);
});
