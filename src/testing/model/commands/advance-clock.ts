import type { AsyncCommand } from "fast-check";
import type { ModelState, RealSystem } from "./context.ts";

/** Time passes (the adapter never reads a clock: every call gets `now`). */
export class AdvanceClockCommand implements AsyncCommand<ModelState, RealSystem> {
  constructor(readonly ms: number) {}
  check(): boolean {
    return true;
  }
  async run(m: ModelState): Promise<void> {
    m.now += this.ms;
  }
  toString(): string {
    return `advanceClock(+${this.ms}ms)`;
  }
}
