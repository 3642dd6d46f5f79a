/** The client's public surface (`Docket` and the types of its API), re-exported by the main entry. */
export * from "./docket.ts";
export { EventHub } from "./bus.ts";
export { Scheduler, Schedules, type ScheduleHost, type SchedulerClosing, type TaskScheduleDefinition } from "./schedules.ts";
export type { DocketStats, KeyStats, QueueStats, RateLimitStats, RunningJobStats, StateCounts, StatsOptions, TaskStats, ThroughputBucket } from "./stats.ts";
