import type { AsyncCommand } from "fast-check";
import { expectSameSettled, expectSameStore, type ModelState, type RealSystem } from "./context.ts";
import { settleOne } from "../../lease-writes.ts";

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
    const got = await settleOne(r.adapter, { kind: "release", id, leaseToken, now: m.now, ...m.keyAsNamed(id, this.jobPick) });
    expectSameSettled(`release(#${id}, ${leaseToken})`, m.store.apply(id, { kind: "release", leaseToken, now: m.now }), got);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    return `release(job ${this.jobPick}, ${this.tokenPick < 0 ? "its current token" : `token ${this.tokenPick}`})`;
  }
}
