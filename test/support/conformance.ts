import { afterAll, describe, it } from "vitest";
import { runCase, unmetNeeds } from "../../src/testing/index.ts";
import { openTarget, type ConformanceTargetName } from "./targets.ts";
import { casesFor } from "./cases.ts";

/**
 * Registers the whole conformance suite for one adapter as vitest tests. A
 * case needing what the target does not provide is registered skipped, with
 * the unmet needs in its name ("… [skipped: needs sql]").
 */
export async function defineConformance(name: ConformanceTargetName): Promise<void> {
  const target = await openTarget(name);
  if (!target) return;
  describe(name, () => {
    afterAll(() => target.dispose());
    for (const c of casesFor(name)) {
      const unmet = unmetNeeds(target, c);
      if (unmet.length > 0) it.skip(`${c.name} [skipped: needs ${unmet.join(", ")}]`, () => undefined);
      else it(c.name, () => runCase(target, c), c.timeoutMs ?? (c.slow ? 60_000 : 20_000));
    }
  });
}
