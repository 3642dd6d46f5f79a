import type { KyselyConformanceCase } from "../harness.ts";
import { kyselyMigrateCases } from "./migrate.ts";
import { raceCases } from "./races.ts";
import { lifecycleRaceCases } from "./races-lifecycle.ts";
import { scheduleRaceCases } from "./schedule-races.ts";
import { statementCases } from "./statements.ts";
import { transactionCases } from "./transaction.ts";
import { handlerTransactionCases } from "./handler-transaction.ts";
import { repairCases } from "./repair.ts";
import { claimScopeCases } from "./claim-scope.ts";
import { fairMarkCases } from "./fair-marks.ts";

/**
 * The cases that need a kysely-based adapter (KyselyTestStore), in a stable
 * order: statement taps, the caller's kysely transaction, the races that
 * hold a session at a labelled statement, and every race's mutant. A kysely
 * target runs these after the portable `conformanceCases()`.
 */
export function kyselyConformanceCases(): KyselyConformanceCase[] {
  return [...kyselyMigrateCases, ...statementCases, ...transactionCases, ...handlerTransactionCases, ...scheduleRaceCases, ...raceCases, ...lifecycleRaceCases, ...repairCases, ...claimScopeCases, ...fairMarkCases];
}
