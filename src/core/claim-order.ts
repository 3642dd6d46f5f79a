/**
 * The claim rule, in one place: which ready jobs a claim takes, and in what
 * order. Adapters select candidates in CLAIM_ORDER and apply
 * `takeWithinCaps` to them; nothing here reads storage.
 */

/** Claim order: priority (smaller first), then runAt (earlier first), then id. Also the order a key admits its waiting jobs. */
export const CLAIM_ORDER = ["priority", "runAt", "id"] as const;

export function byClaimOrder(a: { priority: number; runAt: number; id: number }, b: { priority: number; runAt: number; id: number }): number {
  return a.priority - b.priority || a.runAt - b.runAt || a.id - b.id;
}

/** A ready job a claim may take. */
export interface ClaimCandidate {
  id: number;
  task: string;
  queue: string;
  priority: number;
  runAt: number;
}

/**
 * The greedy cap rule, one pass: walks `candidates` (in claim order) and
 * takes each one unless its queue's or its task's room (remaining cap; a
 * queue or task absent from the maps has no cap) is used up, until `chosen`
 * holds `limit` ids. Takes room as it goes (mutating the maps) and adds
 * tasks whose room reaches 0 to `exhausted`. Stops at the first job of a
 * full task and returns true ("passed over"): the caller must look again
 * without the exhausted tasks, because the candidates' windows may hide, behind
 * that job, one that precedes the rest of the pass.
 */
export function takeWithinCaps(
  candidates: readonly ClaimCandidate[],
  limit: number,
  room: { queues: Map<string, number>; tasks: Map<string, number> },
  chosen: number[],
  exhausted: Set<string>,
): boolean {
  for (const c of candidates) {
    if (chosen.length >= limit) return false;
    const queueRoom = room.queues.get(c.queue);
    if (queueRoom !== undefined && queueRoom <= 0) continue;
    const taskRoom = room.tasks.get(c.task);
    if (taskRoom !== undefined) {
      if (taskRoom <= 0) {
        exhausted.add(c.task);
        return true;
      }
      room.tasks.set(c.task, taskRoom - 1);
      if (taskRoom - 1 === 0) exhausted.add(c.task);
    }
    if (queueRoom !== undefined) room.queues.set(c.queue, queueRoom - 1);
    chosen.push(c.id);
  }
  return false;
}
