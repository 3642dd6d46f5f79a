import type { AsyncCommand } from "fast-check";
import { expectSame, expectSameStore, type ModelState, type RealSystem } from "./context.ts";

/** runNow(job): scheduled → scheduled, due now; attempts and controls unchanged (admitted by the next claim's staging). */
export class RunNowCommand implements AsyncCommand<ModelState, RealSystem> {
  constructor(readonly jobPick: number) {}
  check(m: Readonly<ModelState>): boolean {
    return m.store.jobs.size > 0;
  }
  async run(m: ModelState, r: RealSystem): Promise<void> {
    const id = m.pickJob(this.jobPick)!;
    const got = await r.adapter.runNow({ id, now: m.now });
    expectSame(`runNow(#${id})`, m.store.apply(id, { kind: "runNow", now: m.now }), got);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    return `runNow(job ${this.jobPick})`;
  }
}
