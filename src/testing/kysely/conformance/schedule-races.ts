import { Docket } from "../../../client/docket.ts";
import { settle } from "../../conformance/races-sequenced.ts";
import type { KyselyConformanceCase } from "../harness.ts";
import { engineWithoutTransactions, tickUnfenced } from "../mutations.ts";
import { raceCasesOf, type HeldRace } from "./races.ts";

/**
 * Two schedulers read the same due tick; the first is held at its tick write
 * while the second fires the tick; then the first writes. One job per tick.
 */
const TICK_RACES: HeldRace[] = [
  {
    id: "cron-tick",
    name: "two schedulers that both saw one tick due: the second to write stores nothing",
    guard: "the tick write's compare-and-set (`last_tick < tick`)",
    mutant: {
      instrument: {
        plugins: [tickUnfenced()],
        // SQLite's single writer would run the two passes one after the other: the mutant drops its transactions too.
        wrapEngine: engineWithoutTransactions,
      },
    },
    async scenario({ t, hook, s1, s2 }) {
      t.clock.set(Date.UTC(2030, 0, 1, 10, 0, 30));
      await t.docket().schedules.put("tick", { cron: "* * * * *", task: "tick" });
      t.clock.set(Date.UTC(2030, 0, 1, 10, 1, 5));
      const first = new Docket({ adapter: s1, clock: t.clock });
      const second = new Docket({ adapter: s2, clock: t.clock });
      const held = hook.holdNext("tick");
      const a = first.schedules.runDue();
      await held.reached;
      const b = second.schedules.runDue();
      await settle(b);
      held.release();
      const fired = [...(await a), ...(await b)];
      const jobs = await t.adapter.list({ task: "tick", limit: 10 });
      if (jobs.length !== 1) return `${jobs.length} jobs for one tick (${fired.length} passes reported firing it)`;
      return fired.length === 1 ? null : `${fired.length} passes reported firing the tick`;
    },
  },
];

export const scheduleRaceCases: KyselyConformanceCase[] = raceCasesOf(TICK_RACES);
