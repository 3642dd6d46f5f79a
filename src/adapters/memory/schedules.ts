/**
 * The memory adapter's recurring-job definitions and queue/task controls:
 * upserts, lists by name, and `fireSchedule`, whose compare-and-set of the
 * last tick and the store of the tick's job are one step, so one tick
 * stores one job however many schedulers fire it.
 */
import type { FireScheduleParams, PutScheduleParams, QueueControl, SetQueueControlParams, SetTaskControlParams, StoredSchedule, TaskControl } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { controlIsDefault } from "../../core/controls.ts";
import { sameDefinition } from "../../core/schedules.ts";
import { checkCap, checkNewJobs, checkRateLimit } from "./constraints.ts";
import { enqueue } from "./enqueue.ts";
import { announce, byName, type MemoryState } from "./state.ts";

/** See DocketAdapter.putSchedule: a new one starts at `lastTick`; an existing one with another definition gets it, its last tick never moving back; one with the same definition stays as it is. */
export function putSchedule(state: MemoryState, p: PutScheduleParams): StoredSchedule {
  const current = state.schedules.get(p.name);
  if (current !== undefined && sameDefinition(current, p)) return { ...current };
  const stored: StoredSchedule = {
    name: p.name,
    cron: p.cron,
    timezone: p.timezone,
    task: p.task,
    queue: p.queue,
    payload: p.payload,
    options: p.options,
    lastTick: current === undefined ? p.lastTick : Math.max(current.lastTick, p.lastTick),
    paused: current?.paused ?? false,
    createdAt: current?.createdAt ?? p.now,
    updatedAt: p.now,
  };
  state.schedules.set(p.name, stored);
  return { ...stored };
}

export function listSchedules(state: MemoryState): StoredSchedule[] {
  return [...state.schedules.values()].sort((a, b) => byName(a.name, b.name)).map((s) => ({ ...s }));
}

export function deleteSchedule(state: MemoryState, name: string): boolean {
  return state.schedules.delete(name);
}

/** See DocketAdapter.fireSchedule: the last tick moves to `tick` only if behind it, and then the tick's job is stored. */
export function fireSchedule(state: MemoryState, p: FireScheduleParams, name: string): JobRecord | null {
  const schedule = state.schedules.get(p.name);
  if (schedule === undefined || schedule.paused || schedule.lastTick >= p.tick) return null;
  checkNewJobs([p.job], name);
  schedule.lastTick = p.tick;
  schedule.updatedAt = p.now;
  const [job] = enqueue(state, { jobs: [p.job], now: p.now }, name);
  const { created: _created, ...record } = job!;
  return record;
}

/** See DocketAdapter.pauseSchedule. */
export function pauseSchedule(state: MemoryState, p: { name: string; paused: boolean; now: number; lastTick?: number }): StoredSchedule | null {
  const schedule = state.schedules.get(p.name);
  if (schedule === undefined) return null;
  schedule.paused = p.paused;
  schedule.updatedAt = p.now;
  if (p.lastTick !== undefined) schedule.lastTick = Math.max(schedule.lastTick, p.lastTick);
  return { ...schedule };
}

/** See DocketAdapter.setQueueControl: only the given fields change; a queue back to every default keeps no row. */
export function setQueueControl(state: MemoryState, p: SetQueueControlParams, name: string): QueueControl {
  checkCap(p.maxRunning, name);
  checkRateLimit(p.rateLimit, name);
  const next = { ...(state.queues.get(p.queue) ?? { queue: p.queue, paused: false, maxRunning: null, rateLimit: null }) };
  if (p.paused !== undefined) next.paused = p.paused;
  if (p.maxRunning !== undefined) next.maxRunning = p.maxRunning;
  if (p.rateLimit !== undefined) {
    next.rateLimit = p.rateLimit && { ...p.rateLimit };
    if (p.rateLimit === null) state.rateLogs.delete(`queue:${p.queue}`);
    state.rateHeldUntil.delete(`queue:${p.queue}`);
  }
  // A row back to every default goes (as in SQL), unless rate-keyed jobs marked it.
  if (controlIsDefault(next) && !state.rateKeyed.has(p.queue)) state.queues.delete(p.queue);
  else state.queues.set(p.queue, next);
  announce(state, [{ queue: p.queue, due: false }]);
  return { ...next };
}

export function setTaskControl(state: MemoryState, p: SetTaskControlParams, name: string): TaskControl {
  checkCap(p.maxRunning, name);
  checkRateLimit(p.rateLimit, name);
  const next = { ...(state.tasks.get(p.task) ?? { task: p.task, maxRunning: null, rateLimit: null }) };
  if (p.maxRunning !== undefined) next.maxRunning = p.maxRunning;
  if (p.rateLimit !== undefined) {
    next.rateLimit = p.rateLimit && { ...p.rateLimit };
    if (p.rateLimit === null) state.rateLogs.delete(`task:${p.task}`);
    state.rateHeldUntil.delete(`task:${p.task}`);
  }
  if (controlIsDefault(next)) state.tasks.delete(p.task);
  else state.tasks.set(p.task, next);
  announce(state, [{ queue: null, due: false }]);
  return { ...next };
}

export function listControls(state: MemoryState): { queues: QueueControl[]; tasks: TaskControl[] } {
  return {
    queues: [...state.queues.values()].sort((a, b) => byName(a.queue, b.queue)).map((q) => ({ ...q })),
    tasks: [...state.tasks.values()].sort((a, b) => byName(a.task, b.task)).map((t) => ({ ...t })),
  };
}
