import type { ConformanceCase } from "../harness.ts";
import { capCases } from "./caps.ts";
import { rateLimitCases } from "./rate-limits.ts";
import { fairnessCases } from "./fairness.ts";
import { handOffCases } from "./hand-off.ts";
import { claimCases } from "./claim.ts";
import { claimTaskCases } from "./claim-tasks.ts";
import { concurrencyCases } from "./concurrency.ts";
import { constrainedCases } from "./constrained.ts";
import { enqueueCases } from "./enqueue.ts";
import { inputCases } from "./input.ts";
import { keyCases } from "./keys.ts";
import { keyPolicyCases } from "./keys-policy.ts";
import { leaseCases } from "./lease.ts";
import { migrateCases } from "./migrate.ts";
import { retentionCases } from "./retention.ts";
import { deadLetterCases } from "./dead-letters.ts";
import { idempotencyCases } from "./idempotency.ts";
import { debounceCases } from "./debounce.ts";
import { jobActionCases } from "./job-actions.ts";
import { listErrorCases } from "./list-errors.ts";
import { workerRegistryCases } from "./workers.ts";
import { bulkCases } from "./bulk.ts";
import { maintenanceCases } from "./maintenance.ts";
import { resultCases } from "./results.ts";
import { stepCases } from "./steps.ts";
import { dependencyCases } from "./dependencies.ts";
import { cancelReachCases } from "./cancel-reach.ts";
import { pauseReachCases } from "./pause-reach.ts";
import { retryCases } from "./retry.ts";
import { settleCases } from "./settle.ts";
import { timeoutCases } from "./timeouts.ts";
import { transitionCases } from "./transitions.ts";
import { workerCases } from "./worker.ts";
import { workerFaultCases } from "./worker-faults.ts";
import { workerLeaseCases } from "./worker-lease.ts";
import { workerLoopCases } from "./worker-loop.ts";
import { workerLoggingCases } from "./worker-logging.ts";
import { statsCases } from "./stats.ts";
import { eventCases } from "./events.ts";
import { historyCases } from "./history.ts";
import { scheduleCases } from "./schedules.ts";
import { sequencedRaceCases } from "./races-sequenced.ts";

/** Every portable conformance case (any DocketAdapter), in a stable order. Run each with `runCase`. */
export function conformanceCases(): ConformanceCase[] {
  return [
    ...migrateCases,
    ...enqueueCases,
    ...timeoutCases,
    ...inputCases,
    ...claimCases,
    ...claimTaskCases,
    ...transitionCases,
    ...leaseCases,
    ...settleCases,
    ...retryCases,
    ...retentionCases,
    ...deadLetterCases,
    ...idempotencyCases,
    ...debounceCases,
    ...jobActionCases,
    ...listErrorCases,
    ...workerRegistryCases,
    ...bulkCases,
    ...maintenanceCases,
    ...resultCases,
    ...stepCases,
    ...dependencyCases,
    ...statsCases,
    ...eventCases,
    ...historyCases,
    ...scheduleCases,
    ...cancelReachCases,
    ...pauseReachCases,
    ...keyCases,
    ...keyPolicyCases,
    ...capCases,
    ...rateLimitCases,
    ...fairnessCases,
    ...handOffCases,
    ...constrainedCases,
    ...sequencedRaceCases,
    ...concurrencyCases,
    ...workerCases,
    ...workerLeaseCases,
    ...workerLoopCases,
    ...workerFaultCases,
    ...workerLoggingCases,
  ];
}
