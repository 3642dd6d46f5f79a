import { expect, it } from "vitest";
import { checkModel, failureReport } from "../../src/testing/property.ts";
import type { ScheduleEnv } from "../../src/testing/schedule/concurrent.ts";
import { memoryAdapter, type MemoryAdapter } from "../../src/adapters/memory/index.ts";
import type { DocketAdapter } from "../../src/core/adapter.ts";
import { DEFAULT_MODEL_RUNS } from "../support/property.ts";
import { propertyRuns } from "../support/property-env.ts";

/**
 * The model-based property test (src/testing/property.ts, as the SQL
 * adapters run it in test/property) on the memory adapter: random command
 * sequences, compared with the reference model after every step. Only the
 * model half: the concurrent schedules interleave SQL statements.
 */
it("memory: property › model › every command sequence leaves the adapter in the reference model's state, step by step", async () => {
  let current: MemoryAdapter = memoryAdapter();
  await current.migrate();
  // One adapter object for the whole property; each run resets it to a fresh, migrated store.
  const adapter = new Proxy({} as DocketAdapter, { get: (_target, key) => Reflect.get(current, key, current)?.bind?.(current) ?? Reflect.get(current, key, current) });
  const env = {
    workers: [{ adapter }],
    plain: adapter,
    reset: async () => {
      current = memoryAdapter();
      await current.migrate();
    },
  } as unknown as ScheduleEnv;
  const details = await checkModel(env, { numRuns: propertyRuns(DEFAULT_MODEL_RUNS) });
  const report = failureReport(details, (seed, path) => `DOCKET_PROPERTY_SEED=${seed} DOCKET_PROPERTY_PATH=${path} npx vitest run test/memory/model.test.ts`);
  expect(report).toBeNull();
}, 120_000);
