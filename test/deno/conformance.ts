import { conformanceCases, runCase } from "../../src/testing/index.ts";
import { openTarget, type TargetName } from "./targets.ts";

/**
 * The Deno binding of the runner-agnostic conformance suite: one Deno.test
 * per case, named like the vitest ones (`sqlite: claim › …`), with the same
 * timeouts (20 s, 60 s for slow cases). Sanitizers are off because a
 * target's admin pool lives across cases by design.
 */
export async function defineConformance(name: TargetName): Promise<void> {
  const target = await openTarget(name);
  if (!target) {
    Deno.test({ name: `${name}: every case (server unreachable, see the banner above)`, ignore: true, fn: () => {} });
    return;
  }
  Deno.test.afterAll(() => target.dispose());
  for (const c of conformanceCases()) {
    Deno.test({
      name: `${name}: ${c.name}`,
      sanitizeOps: false,
      sanitizeResources: false,
      fn: () => withTimeout(runCase(target, c), c.slow ? 60_000 : 20_000),
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
