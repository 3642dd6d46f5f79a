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
    const { id, leaseToken } = m.pickLeased(this.jobPick, this.tokenPick);
    const got = await r.adapter.release({ id, leaseToken, now: m.now });
    expectSame(`release(#${id}, ${leaseToken})`, m.store.apply(id, { kind: "release", leaseToken, now: m.now }), got);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    return `release(job ${this.jobPick}, ${this.tokenPick < 0 ? "its current token" : `token ${this.tokenPick}`})`;
  }
}
