import { conformanceCases } from "../../src/testing/index.ts";
import { kyselyConformanceCases, type KyselyConformanceCase } from "../../src/testing/kysely/index.ts";
import type { ConformanceTargetName } from "./targets.ts";

/** The cases a target runs: the portable kit on every target; on the SQL (kysely) targets, docket/testing/kysely's cases after it. */
export function casesFor(name: ConformanceTargetName): KyselyConformanceCase[] {
  return name === "memory" ? conformanceCases() : [...conformanceCases(), ...kyselyConformanceCases()];
}
