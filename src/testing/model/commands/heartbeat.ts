import type { AsyncCommand } from "fast-check";
import { expectSame, expectSameStore, type ModelState, type RealSystem } from "./context.ts";

/** heartbeat(job, token): extends the lease, only for the current holder. `tokenPick` may pick a stale token. */
export class HeartbeatCommand implements AsyncCommand<ModelState, RealSystem> {
  constructor(
    readonly jobPick: number,
    readonly tokenPick: number,
    readonly extendMs: number,
  ) {}
  check(m: Readonly<ModelState>): boolean {
    return m.store.jobs.size > 0;
  }
  async run(m: ModelState, r: RealSystem): Promise<void> {
    const { id, leaseToken } = m.pickLeased(this.jobPick, this.tokenPick);
    const params = { id, leaseToken, now: m.now, leaseExpiresAt: m.now + this.extendMs };
    const got = await r.adapter.heartbeat(params);
    expectSame(`heartbeat(#${id}, ${leaseToken})`, m.store.apply(id, { kind: "heartbeat", ...params }), got);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    return `heartbeat(job ${this.jobPick}, ${this.tokenPick < 0 ? "its current token" : `token ${this.tokenPick}`}, +${this.extendMs}ms)`;
  }
}
