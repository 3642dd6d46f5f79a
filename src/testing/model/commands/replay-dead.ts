import type { AsyncCommand } from "fast-check";
import { expectSameList, expectSameStore, type ModelState, type RealSystem } from "./context.ts";

/** replayDead(limit, queue?): up to `limit` dead jobs that died by now (of `queue`), oldest death first, each replayed. */
export class ReplayDeadCommand implements AsyncCommand<ModelState, RealSystem> {
  constructor(
    readonly limit: number,
    readonly queue: string | null,
  ) {}
  check(): boolean {
    return true;
  }
  async run(m: ModelState, r: RealSystem): Promise<void> {
    const filter = this.queue === null ? {} : { queue: this.queue };
    const got = await r.adapter.replayDead({ ...filter, diedBefore: m.now, limit: this.limit, now: m.now });
    const picked = [...m.store.jobs.values()]
      .filter((j) => j.state === "dead" && j.finishedAt !== null && j.finishedAt <= m.now && (this.queue === null || j.queue === this.queue))
      .sort((a, b) => a.finishedAt! - b.finishedAt! || a.id - b.id)
      .slice(0, this.limit);
    const modelled = picked.map((j) => m.store.apply(j.id, { kind: "replay", now: m.now })!).sort((a, b) => a.id - b.id);
    expectSameList(this.toString(), modelled, got);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    return `replayDead(limit ${this.limit}${this.queue === null ? "" : `, queue ${this.queue}`})`;
  }
}
