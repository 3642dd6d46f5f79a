import type { AsyncCommand } from "fast-check";
import { expectSameStore, fail, type ModelState, type RealSystem } from "./context.ts";

type RateLimit = { readonly limit: number; readonly periodMs: number };

/** A queue control change (pause/resume, cap, rate limit) or a task control change (cap, rate limit). */
export type ControlChange =
  | { readonly kind: "queue"; readonly queue: string; readonly paused?: boolean; readonly maxRunning?: number | null; readonly rateLimit?: RateLimit | null }
  | { readonly kind: "task"; readonly task: string; readonly maxRunning?: number | null; readonly rateLimit?: RateLimit | null };

/** setQueueControl / setTaskControl: upserts only the given fields; compared with the model, then every control (listControls) and the jobs. */
export class ControlCommand implements AsyncCommand<ModelState, RealSystem> {
  constructor(readonly change: ControlChange) {}
  check(): boolean {
    return true;
  }
  async run(m: ModelState, r: RealSystem): Promise<void> {
    const c = this.change;
    let got: unknown;
    let modelled: unknown;
    const common = { ...(c.maxRunning === undefined ? {} : { maxRunning: c.maxRunning }), ...(c.rateLimit === undefined ? {} : { rateLimit: c.rateLimit }) };
    if (c.kind === "queue") {
      const p = { queue: c.queue, ...(c.paused === undefined ? {} : { paused: c.paused }), ...common };
      got = await r.adapter.setQueueControl(p);
      modelled = m.store.setQueueControl(p);
    } else {
      got = await r.adapter.setTaskControl({ task: c.task, ...common });
      modelled = m.store.setTaskControl({ task: c.task, ...common });
    }
    if (JSON.stringify(got) !== JSON.stringify(modelled)) fail(this.toString(), [`returned ${JSON.stringify(got)}, model says ${JSON.stringify(modelled)}`]);
    const all = await r.adapter.listControls();
    const model = m.store.listControls();
    if (JSON.stringify(all) !== JSON.stringify(model)) fail(`${this.toString()} listControls`, [`stored ${JSON.stringify(all)}`, `model   ${JSON.stringify(model)}`]);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    const c = this.change;
    const rate = c.rateLimit === undefined ? null : c.rateLimit === null ? "no rate limit" : `rate ${c.rateLimit.limit}/${c.rateLimit.periodMs}ms`;
    const cap = c.maxRunning === undefined ? null : `cap ${c.maxRunning}`;
    if (c.kind === "task") return `setTaskControl(${c.task}, ${[cap, rate].filter((x) => x !== null).join(", ")})`;
    const parts = [c.paused === undefined ? null : c.paused ? "pause" : "resume", cap, rate].filter((x) => x !== null);
    return `setQueueControl(${c.queue}, ${parts.join(", ") || "no change"})`;
  }
}
