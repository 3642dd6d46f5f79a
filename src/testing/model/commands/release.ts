import type { AsyncCommand } from "fast-check";
import { expectSame, expectSameStore, type ModelState, type RealSystem } from "./context.ts";

/** release(job, token): running → ready giving the attempt back, only for the current holder. */
export class ReleaseCommand implements AsyncCommand<ModelState, RealSystem> {
  constructor(
    readonly jobPick: number,
    readonly tokenPick: number,
  ) {}
  check(m: Readonly<ModelState>): boolean {
    return m.store.jobs.size > 0;
  }
  async run(m: ModelState, r: RealSystem): Promise<void> {
    const id = m.pickJob(this.jobPick)!;
    const leaseToken = m.pickToken(id, this.tokenPick);
    const got = await r.adapter.release({ id, leaseToken, now: m.now });
    expectSame(`release(#${id}, ${leaseToken})`, m.store.apply(id, { kind: "release", leaseToken, now: m.now }), got);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    return `release(job ${this.jobPick}, token ${this.tokenPick})`;
  }
}
