import { LIST_IDS_MAX, type AfterSpec, type DocketAdapter, type NewJob } from "./adapter.ts";
import { toJob, type Job } from "./job.ts";
import { InvalidArgumentError } from "./errors.ts";
import { shown } from "./shown.ts";

/** The most parents one job may name (EnqueueOptions.after). */
export const MAX_PARENTS = 1000;

/** One parent as an enqueue names it: a stored job's id, or `{ ref }`, another item of the same `enqueueMany`. */
export type ParentRef = number | { ref: string };

/** A validated `after`: stored parents by id, batch parents by ref name, each once. */
export interface ParsedAfter {
  ids: number[];
  refs: string[];
}

/**
 * Validates `after` (an array of 1..MAX_PARENTS job ids and, when `refsAllowed`,
 * `{ ref: name }` items), naming `at` in every message. A parent named twice
 * is InvalidArgumentError: a job waits once for each parent.
 */
export function parseAfter(value: unknown, at: string, refsAllowed: boolean): ParsedAfter {
  if (!Array.isArray(value)) throw new InvalidArgumentError(`${at}after must be an array of parent job ids${refsAllowed ? " or { ref } items" : ""}, got ${shown(value)}`);
  if (value.length === 0 || value.length > MAX_PARENTS) throw new InvalidArgumentError(`${at}after must name 1 to ${MAX_PARENTS} parents, got ${value.length}`);
  const ids: number[] = [];
  const refs: string[] = [];
  value.forEach((p: unknown, i) => {
    const where = `${at}after[${i}]`;
    if (typeof p === "number") {
      if (!Number.isSafeInteger(p) || p < 1) throw new InvalidArgumentError(`${where} must be a job id (an integer >= 1), got ${shown(p)}`);
      if (ids.includes(p)) throw new InvalidArgumentError(`${where} names job ${p} twice`);
      ids.push(p);
      return;
    }
    if (typeof p === "object" && p !== null && !Array.isArray(p)) {
      const keys = Object.keys(p);
      if (keys.length !== 1 || keys[0] !== "ref") throw new InvalidArgumentError(`${where} must be a job id or { ref: name }, got ${shown(p)}`);
      if (!refsAllowed) throw new InvalidArgumentError(`${where}: { ref } names another item of the same enqueueMany; enqueue takes job ids only`);
      const ref = (p as { ref: unknown }).ref;
      if (typeof ref !== "string" || ref.length === 0) throw new InvalidArgumentError(`${where}.ref must be a non-empty string, got ${shown(ref)}`);
      if (refs.includes(ref)) throw new InvalidArgumentError(`${where} names ref ${shown(ref)} twice`);
      refs.push(ref);
      return;
    }
    throw new InvalidArgumentError(`${where} must be a job id or { ref: name }, got ${shown(p)}`);
  });
  return { ids, refs };
}

/**
 * The batch's parents resolved: each item's `after` with its ref names
 * turned into indexes of the batch. `names[i]` is item i's `ref` (or
 * undefined); `keys[i]` its idempotency key (or undefined): items with one
 * key are stored as one job, so a cycle through them counts. A name given
 * to two items, a ref that names no item, and a cycle (an item, or the job
 * it shares, that is its own ancestor) are InvalidArgumentError.
 */
export function resolveAfter(names: readonly (string | undefined)[], afters: readonly (ParsedAfter | null)[], label: string, keys: readonly (string | undefined)[] = []): (AfterSpec | null)[] {
  const index = new Map<string, number>();
  names.forEach((name, i) => {
    if (name === undefined) return;
    if (index.has(name)) throw new InvalidArgumentError(`${label}[${i}].ref ${shown(name)} is already the ref of ${label}[${index.get(name)}]`);
    index.set(name, i);
  });
  const specs = afters.map((after, i): AfterSpec | null => {
    if (after === null) return null;
    const refs = after.refs.map((name) => {
      const at = index.get(name);
      if (at === undefined) throw new InvalidArgumentError(`${label}[${i}].options.after names ref ${shown(name)}, which no item of this call has`);
      return at;
    });
    return { ids: after.ids, refs };
  });
  // Items that share an idempotency key become one job: each stands for the first item with its key.
  const first = new Map<string, number>();
  const job = names.map((_, i) => {
    const key = keys[i];
    if (key === undefined) return i;
    if (!first.has(key)) first.set(key, i);
    return first.get(key)!;
  });
  const cycle = findCycle(specs, job);
  if (cycle !== null) {
    const shared = cycle.some((i) => job.some((j, k) => j === i && k !== i)) ? " (items with one idempotencyKey are one job)" : "";
    throw new InvalidArgumentError(`${label}: the refs form a cycle${shared} (${cycle.map((i) => `${label}[${i}]`).join(" → ")}): no job of it could ever run`);
  }
  return specs;
}

/**
 * A cycle among the batch's jobs, as item indexes along it (first repeated
 * at the end), or null. `job[i]` is the item that stands for item i's job:
 * a job's parents are those of every item it stands for.
 */
function findCycle(specs: readonly (AfterSpec | null)[], job: readonly number[]): number[] | null {
  const parents = specs.map(() => [] as number[]);
  specs.forEach((spec, i) => {
    for (const p of spec?.refs ?? []) parents[job[i]!]!.push(job[p]!);
  });
  const mark = new Array<0 | 1 | 2>(specs.length).fill(0);
  const path: number[] = [];
  const visit = (i: number): number[] | null => {
    if (mark[i] === 2) return null;
    if (mark[i] === 1) return [...path.slice(path.indexOf(i)), i];
    mark[i] = 1;
    path.push(i);
    for (const parent of parents[i]!) {
      const found = visit(parent);
      if (found) return found;
    }
    path.pop();
    mark[i] = 2;
    return null;
  };
  for (let i = 0; i < specs.length; i++) {
    const found = visit(i);
    if (found) return found;
  }
  return null;
}

/** Whether a new job has parents. */
export function hasParents(job: NewJob): boolean {
  return job.after != null && job.after.ids.length + job.after.refs.length > 0;
}

/** The reason stored on a waiting job cancelled because its parent `parent` ended `state` (dead or cancelled). */
export function cascadeReason(parent: number, state: string): string {
  return `cancelled: parent job ${parent} ended ${state}`;
}

/** The message of a parent that ended before its child was enqueued. */
export function endedParentMessage(parent: number, state: string): string {
  return `after: parent job ${parent} is ${state}; a child of a dead or cancelled job could never run`;
}

/** Jobs `ids` as stored now, in id order (a purged one left out): one read per LIST_IDS_MAX ids. */
export async function jobsOf(adapter: DocketAdapter, ids: readonly number[]): Promise<Job[]> {
  const out: Job[] = [];
  for (let i = 0; i < ids.length; i += LIST_IDS_MAX) {
    const chunk = ids.slice(i, i + LIST_IDS_MAX);
    for (const r of await adapter.list({ ids: chunk, limit: chunk.length })) out.push(toJob(r));
  }
  return out;
}
