import type { AsyncCommand } from "fast-check";
import { expectSame, expectSameStore, type ModelState, type RealSystem } from "./context.ts";

/** replay(job): dead → scheduled, due now, attempt 0, last_error cleared (admitted by the next claim's staging). */
export class ReplayCommand implements AsyncCommand<ModelState, RealSystem> {
  constructor(readonly jobPick: number) {}
  check(m: Readonly<ModelState>): boolean {
    return m.store.jobs.size > 0;
  }
  async run(m: ModelState, r: RealSystem): Promise<void> {
    const id = m.pickJob(this.jobPick)!;
    const got = await r.adapter.replay({ id, now: m.now });
    expectSame(`replay(#${id})`, m.store.apply(id, { kind: "replay", now: m.now }), got);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    return `replay(job ${this.jobPick})`;
  }
}
