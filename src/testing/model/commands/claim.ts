import type { AsyncCommand } from "fast-check";
import { expectSameList, expectSameStore, fail, type ModelState, type RealSystem } from "./context.ts";

/** claim(queues, limit): the due jobs in claim order, under one fresh lease token. */
export class ClaimCommand implements AsyncCommand<ModelState, RealSystem> {
  constructor(
    readonly queues: readonly string[],
    readonly limit: number,
    readonly leaseMs: number,
  ) {}
  check(): boolean {
    return true;
  }
  async run(m: ModelState, r: RealSystem): Promise<void> {
    const params = { queues: this.queues, limit: this.limit, now: m.now, leaseToken: m.nextToken(), leaseExpiresAt: m.now + this.leaseMs };
    const got = await r.adapter.claim(params);
    if (got.length > this.limit) fail(this.toString(), [`claimed ${got.length} jobs, limit ${this.limit}`]);
    const modelled = m.store.claim(params);
    for (const j of modelled) m.recordToken(j.id, params.leaseToken);
    expectSameList(`${this.toString()} as ${params.leaseToken}`, modelled, got);
    await expectSameStore(this.toString(), m, r);
  }
  toString(): string {
    return `claim([${this.queues.join(",")}], limit ${this.limit}, lease ${this.leaseMs}ms)`;
  }
}
