/**
 * Same-key overlaps: how far the handler runs of the jobs of one key went
 * beyond the key's limit, from (key, start, end) records taken with one wall
 * clock (bench/children.ts `wallNow`) in every worker process.
 *
 * Each key's starts and ends are swept in time order; a run that ends at the
 * instant another starts does not overlap it. At each start, with `before`
 * runs of its key already running:
 * - limit 1: the start adds `before` overlaps, so the count is the number of
 *   pairs of runs of one key whose intervals intersect;
 * - limit L > 1: the start adds 1 if `before + 1 > L` (an excess start: a
 *   moment where more than L ran).
 */

/** One handler run: its key's number and its wall-clock start and end, ms. */
export interface KeyedRun {
  key: number;
  start: number;
  end: number;
}

export interface OverlapCount {
  /** Intersecting pairs (limit 1) or excess starts (limit > 1), summed over the keys. */
  overlaps: number;
  /** The most runs of one key seen running at one moment. */
  maxRunning: number;
  /** Keys with at least one overlap. */
  keysOverLimit: number;
}

export function sameKeyOverlaps(runs: readonly KeyedRun[], limit: number): OverlapCount {
  const byKey = new Map<number, KeyedRun[]>();
  for (const r of runs) {
    const list = byKey.get(r.key);
    if (list) list.push(r);
    else byKey.set(r.key, [r]);
  }
  let overlaps = 0;
  let maxRunning = 0;
  let keysOverLimit = 0;
  for (const list of byKey.values()) {
    // [time, +1 start | -1 end]; at one instant ends sort before starts.
    const events: [number, number][] = [];
    for (const r of list) events.push([r.start, 1], [r.end, -1]);
    events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let running = 0;
    let keyOverlaps = 0;
    for (const [, step] of events) {
      if (step === 1) {
        if (running + 1 > limit) keyOverlaps += limit === 1 ? running : 1;
        running++;
        if (running > maxRunning) maxRunning = running;
      } else {
        running--;
      }
    }
    overlaps += keyOverlaps;
    if (keyOverlaps > 0) keysOverLimit++;
  }
  return { overlaps, maxRunning, keysOverLimit };
}
