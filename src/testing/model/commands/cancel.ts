import type { AsyncCommand } from "fast-check";
import { expectSame, expectSameStore, type ModelState, type RealSystem } from "./context.ts";

/** cancel(job): any unfinished state → cancelled; null for a finished job. */
export class CancelCommand implements AsyncCommand<ModelState, RealSystem> {
  constructor(readonly jobPick: number) {}
  check(m: Readonly<ModelState>): boolean {
    return m.store.jobs.size > 0;
  }
  async run(m: ModelState, r: RealSystem): Promise<void> {
    const id = m.pickJob(this.jobPick)!;
    const got = await r.adapter.cancel({ id, now: m.now });
    expectSame(`cancel(#${id})`, m.store.apply(id, { kind: "cancel", now: m.now }), got);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    return `cancel(job ${this.jobPick})`;
  }
}
