/** Queue and task controls (pause, cap, rate limit), as stored: what a stored row must hold. */

/**
 * Whether a control sets nothing: not paused, no cap, no rate limit. A queue
 * or task whose control is back to this keeps no stored row
 * (DocketAdapter.setQueueControl), unless its jobs marked the queue.
 */
export function controlIsDefault(c: { readonly paused?: boolean; readonly maxRunning: number | null; readonly rateLimit: unknown }): boolean {
  return c.paused !== true && c.maxRunning === null && c.rateLimit === null;
}
