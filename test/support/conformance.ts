import { afterAll, describe, it } from "vitest";
import { conformanceCases, runCase } from "../../src/testing/index.ts";
import { openTarget, type TargetName } from "./targets.ts";

/** Registers the whole conformance suite for one adapter as vitest tests. */
export async function defineConformance(name: TargetName): Promise<void> {
  const target = await openTarget(name);
  if (!target) return;
  describe(name, () => {
    afterAll(() => target.dispose());
    for (const c of conformanceCases()) {
      it(c.name, () => runCase(target, c), c.slow ? 60_000 : 20_000);
    }
  });
}
