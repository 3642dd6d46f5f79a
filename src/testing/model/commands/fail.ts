import type { AsyncCommand } from "fast-check";
import { expectSameSettled, expectSameStore, type ModelState, type RealSystem } from "./context.ts";
import { settleOne } from "../../lease-writes.ts";

/** fail(job, token, retryAt | null): running → scheduled (retry) or dead, only for the current holder. */
export class FailCommand implements AsyncCommand<ModelState, RealSystem> {
  constructor(
    readonly jobPick: number,
    readonly tokenPick: number,
    /** null: bury; otherwise retry this many ms from now. */
    readonly retryInMs: number | null,
  ) {}
  check(m: Readonly<ModelState>): boolean {
    return m.store.jobs.size > 0;
  }
  async run(m: ModelState, r: RealSystem): Promise<void> {
    const { id, leaseToken } = m.pickLeased(this.jobPick, this.tokenPick);
    const params = { id, leaseToken, now: m.now, error: "boom", retryAt: this.retryInMs === null ? null : m.now + this.retryInMs };
    const got = await settleOne(r.adapter, { kind: "fail", ...params, ...m.keyAsNamed(id, this.jobPick) });
    expectSameSettled(`fail(#${id}, ${leaseToken})`, m.store.apply(id, { kind: "fail", ...params }), got);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    return `fail(job ${this.jobPick}, ${this.tokenPick < 0 ? "its current token" : `token ${this.tokenPick}`}, ${this.retryInMs === null ? "bury" : `retry +${this.retryInMs}ms`})`;
  }
}
