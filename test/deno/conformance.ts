import { runCase, unmetNeeds } from "../../src/testing/index.ts";
import { openTarget, type ConformanceTargetName } from "./targets.ts";
import { casesFor } from "../support/cases.ts";

/**
 * The Deno binding of the runner-agnostic conformance suite: one Deno.test
 * per case, named like the vitest ones (`sqlite: claim › …`), with the same
 * timeouts (20 s, 60 s for slow cases). Sanitizers are off because a
 * target's admin pool lives across cases by design. A case needing what the
 * target does not provide is registered ignored, the unmet needs in its name.
 */
export async function defineConformance(name: ConformanceTargetName): Promise<void> {
  const target = await openTarget(name);
  if (!target) {
    Deno.test({ name: `${name}: every case (server unreachable, see the banner above)`, ignore: true, fn: () => {} });
    return;
  }
  Deno.test.afterAll(() => target.dispose());
  for (const c of casesFor(name)) {
    const unmet = unmetNeeds(target, c);
    if (unmet.length > 0) {
      Deno.test({ name: `${name}: ${c.name} [skipped: needs ${unmet.join(", ")}]`, ignore: true, fn: () => {} });
      continue;
    }
    Deno.test({
      name: `${name}: ${c.name}`,
      sanitizeOps: false,
      sanitizeResources: false,
      fn: () => withTimeout(runCase(target, c), c.timeoutMs ?? (c.slow ? 60_000 : 20_000)),
    });
  }
}

async function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
