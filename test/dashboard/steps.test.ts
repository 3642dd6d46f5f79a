import { describe, expect, it } from "vitest";
import { Docket } from "../../src/index.ts";
import { memoryAdapter } from "../../src/memory.ts";

/** The job page lists a job's durable steps (`ctx.step`), escaped, with their results. */
describe("dashboard job page: steps", () => {
  it("shows each recorded step's name and result, and says so when there is none", async () => {
    const docket = new Docket({ adapter: memoryAdapter() });
    await docket.migrate();
    const w = docket.worker({
      pollMs: 5,
      logger: null,
      handlers: {
        charge: async (_p, ctx) => {
          await ctx.step("charge <card>", () => ({ id: "ch_<1>" }));
          await ctx.step("email", () => "sent");
        },
        plain: () => undefined,
      },
    });
    const stepped = await docket.enqueue("charge", {});
    const plain = await docket.enqueue("plain", {});
    await w.start();
    try {
      await docket.waitFor(stepped.id, { timeoutMs: 5_000, pollMs: 5 });
      await docket.waitFor(plain.id, { timeoutMs: 5_000, pollMs: 5 });
    } finally {
      await w.stop();
    }
    const handler = docket.dashboard({ authorize: () => true });
    const page = async (id: number) => (await handler(new Request(`http://127.0.0.1/jobs/${id}`))).text();
    const detail = await page(stepped.id);
    expect(detail).toContain('id="steps"');
    expect(detail).toContain("charge &lt;card&gt;");
    expect(detail).toContain("ch_&lt;1&gt;");
    expect(detail).toContain("step email recorded");
    expect(await page(plain.id)).toContain("No step recorded.");
  });
});
