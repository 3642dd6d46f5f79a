import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Docket } from "../../src/client/docket.ts";
import type { DisposableTarget, TargetName } from "../support/targets.ts";
import { openTarget } from "../support/targets.ts";
import { spawnGoChild } from "../support/go-child.ts";

const CHILD = join(import.meta.dirname, "../support/cron-child.ts");
const PROCESSES = 4;
const RUN_MS = 4_500;

interface Report {
  fired: { tick: number; id: number }[];
  errors: string[];
}

const scheduler = (args: string[]) => spawnGoChild<Report>(CHILD, args, "scheduler");

/** A schedule ticking every second, fired by 4 scheduler processes at once: exactly one job per tick, no tick missed. */
for (const name of ["sqlite", "postgres", "mysql"] as TargetName[]) {
  describe(`${name}: recurring jobs across processes`, () => {
    let target: DisposableTarget | null = null;
    beforeAll(async () => void (target = await openTarget(name)));
    afterAll(async () => target?.dispose());
    it(`${PROCESSES} schedulers in separate processes fire each tick of an every-second schedule exactly once`, async (ctx) => {
      if (!target) return ctx.skip();
      const store = await target.open();
      const setup = await store.connect();
      await setup.migrate();
      const location = store.location;
      if (!location) throw new Error("the target does not expose its location");
      const children = Array.from({ length: PROCESSES }, () => scheduler([name, location, store.tablePrefix, String(RUN_MS)]));
      await Promise.all(children.map((c) => c.ready));
      await new Docket({ adapter: setup }).schedules.put("every-second", { cron: "* * * * * *", task: "tick" });
      for (const c of children) c.go();
      const reports = await Promise.all(children.map((c) => c.result));
      const jobs = await setup.list({ task: "tick", limit: 1_000 });
      await setup.close();
      await store.close();
      const ticks = jobs.map((j) => j.runAt).sort((a, b) => a - b);
      const fired = reports.flatMap((r) => r.fired);
      console.log(
        `${name}: ${jobs.length} ticks fired by ${PROCESSES} processes (${reports.map((r) => r.fired.length).join(" + ")}), ` +
          `${reports.reduce((n, r) => n + r.errors.length, 0)} pass errors`,
      );
      expect(reports.flatMap((r) => r.errors)).toEqual([]);
      expect(jobs.length).toBeGreaterThanOrEqual(3);
      expect(new Set(ticks).size, "one job per tick").toBe(ticks.length);
      for (let i = 1; i < ticks.length; i++) expect(ticks[i]! - ticks[i - 1]!, "no tick missed").toBe(1_000);
      expect(fired.map((f) => f.id).sort((a, b) => a - b), "each tick reported by the one process that fired it").toEqual(jobs.map((j) => j.id).sort((a, b) => a - b));
    }, 60_000);
  });
}
