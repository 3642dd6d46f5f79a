import type { AsyncCommand } from "fast-check";
import { expectSameStore, fail, type ModelState, type RealSystem } from "./context.ts";
import { extendLease } from "../../lease-writes.ts";

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
    const extended = await extendLease(r.adapter, params);
    const modelled = m.store.apply(id, { kind: "heartbeat", ...params });
    if (extended !== (modelled !== null)) fail(`heartbeat(#${id}, ${leaseToken})`, [`extended: ${extended}, model says ${modelled !== null}`]);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    return `heartbeat(job ${this.jobPick}, ${this.tokenPick < 0 ? "its current token" : `token ${this.tokenPick}`}, +${this.extendMs}ms)`;
  }
}
