import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DisposableTarget, TargetName } from "../support/targets.ts";
import { openTarget } from "../support/targets.ts";
import { spawnGoChild } from "../support/go-child.ts";

const CHILD = join(import.meta.dirname, "../support/idempotency-child.ts");
const PROCESSES = 4;
const KEYS = Array.from({ length: 40 }, (_, i) => `order-${i}`);

const producer = (args: string[]) => spawnGoChild<{ key: string; id: number; created: boolean }[]>(CHILD, args, "producer");

/** One idempotency key enqueued at once from separate processes creates one job; every caller gets it. */
for (const name of ["sqlite", "postgres", "mysql"] as TargetName[]) {
  describe(`${name}: idempotency keys across processes`, () => {
    let target: DisposableTarget | null = null;
    beforeAll(async () => void (target = await openTarget(name)));
    afterAll(async () => target?.dispose());
    it(`${PROCESSES} processes enqueueing the same ${KEYS.length} keys at once create one job per key, and every process gets it`, async (ctx) => {
      if (!target) return ctx.skip();
      const store = await target.open();
      const setup = await store.connect();
      await setup.migrate();
      await setup.close();
      const location = store.location;
      if (!location) throw new Error("the target does not expose its location");
      const producers = Array.from({ length: PROCESSES }, () => producer([name, location, store.tablePrefix, KEYS.join(",")]));
      await Promise.all(producers.map((p) => p.ready));
      for (const p of producers) p.go();
      const results = await Promise.all(producers.map((p) => p.result));
      for (const key of KEYS) {
        const got = results.map((r) => r.find((x) => x.key === key)!);
        expect(got.filter((g) => g.created).length, key).toBe(1);
        expect(new Set(got.map((g) => g.id)).size, key).toBe(1);
      }
      await store.close();
    }, 60_000);
  });
}
