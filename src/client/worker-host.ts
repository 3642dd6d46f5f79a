/**
 * The WorkerHost a Docket hands each of its workers (src/worker/host.ts):
 * the docket's public surface, bound, with its payload limit, maintenance
 * and its bus's pause notices. Built here so the Docket class stays its API.
 */
import type { WorkerHost } from "../worker/host.ts";
import type { PayloadLimit } from "./payload-limit.ts";
import { maintain, type SweeperHost } from "./sweeper.ts";
import type { LocalBus } from "./bus.ts";

/** What a docket gives: the host's plain fields, and the methods the host binds. */
export type WorkerHostSource = Pick<WorkerHost, "adapter" | "clock" | "random" | "defaultQueue" | "taskQueues" | "planFailure" | "listens" | "publish" | "onEnqueued" | "onCancelled" | "reclaimExpired"> & {
  readonly maxPayloadBytes: number;
  payloadLimit(): Promise<number>;
};

export function workerHost(d: WorkerHostSource, payloadLimit: PayloadLimit, sweeper: SweeperHost, bus: Pick<LocalBus, "onPaused" | "onScheduled" | "onClose" | "closed">): WorkerHost {
  return {
    adapter: d.adapter,
    clock: d.clock,
    random: d.random,
    defaultQueue: d.defaultQueue,
    taskQueues: () => d.taskQueues(),
    payloadLimit: () => payloadLimit.known() ?? d.payloadLimit().catch(() => d.maxPayloadBytes),
    planFailure: (job, now) => d.planFailure(job, now),
    listens: (type) => d.listens(type),
    publish: (event) => d.publish(event),
    onEnqueued: (listener) => d.onEnqueued(listener),
    onCancelled: (listener) => d.onCancelled(listener),
    onPaused: (listener) => bus.onPaused(listener),
    onScheduled: (listener) => bus.onScheduled(listener),
    onClose: (listener) => bus.onClose(listener),
    closed: () => bus.closed,
    reclaimExpired: () => d.reclaimExpired(),
    maintain: (failed) => maintain(sweeper, failed),
  };
}
