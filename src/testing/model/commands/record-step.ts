import type { AsyncCommand } from "fast-check";
import { withStep } from "../../../core/steps.ts";
import { expectSameStore, fail, type ModelState, type RealSystem } from "./context.ts";

/** recordStep(job, token, name): stores the job's steps with one more, only for the current holder. `tokenPick` may pick a stale token. */
export class RecordStepCommand implements AsyncCommand<ModelState, RealSystem> {
  constructor(
    readonly jobPick: number,
    readonly tokenPick: number,
    readonly name: string,
  ) {}
  check(m: Readonly<ModelState>): boolean {
    return m.store.jobs.size > 0;
  }
  async run(m: ModelState, r: RealSystem): Promise<void> {
    const { id, leaseToken } = m.pickLeased(this.jobPick, this.tokenPick);
    const steps = withStep(m.store.get(id)?.steps ?? null, this.name, JSON.stringify({ by: leaseToken }), m.now);
    const params = { id, leaseToken, now: m.now, steps };
    const recorded = await r.adapter.recordStep(params);
    const modelled = m.store.apply(id, { kind: "recordStep", ...params });
    if ((recorded !== null) !== (modelled !== null)) fail(`recordStep(#${id}, ${leaseToken})`, [`recorded: ${recorded !== null}, model says ${modelled !== null}`]);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    return `recordStep(job ${this.jobPick}, ${this.tokenPick < 0 ? "its current token" : `token ${this.tokenPick}`}, ${this.name})`;
  }
}
