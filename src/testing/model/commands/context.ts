import type { DocketAdapter, SettledJob } from "../../../core/adapter.ts";
import type { JobRecord } from "../../../core/job.ts";
import { ReferenceModel, diffJob, toModelJob, type ModelJob } from "../model.ts";

/** The model side of a model-based run: the reference store, the model's clock and every lease token ever issued. */
export class ModelState {
  readonly store = new ReferenceModel();
  now: number;
  /** Every token issued per job id, oldest first (stale tokens stay usable, on purpose). */
  readonly tokens = new Map<number, string[]>();
  #tokenSeq = 0;

  constructor(now: number) {
    this.now = now;
  }

  nextToken(): string {
    return `L${++this.#tokenSeq}`;
  }

  /** The id of the `pick`-th job (modulo the number of jobs), or null when there is none. */
  pickJob(pick: number): number | null {
    const ids = [...this.store.jobs.keys()].sort((a, b) => a - b);
    return ids.length === 0 ? null : ids[pick % ids.length]!;
  }

  /** A token for job `id`: the `pick`-th one ever issued for it (so possibly stale), or a never-issued token. */
  pickToken(id: number, pick: number): string {
    const all = this.tokens.get(id) ?? [];
    return all.length === 0 || pick >= all.length * 2 ? "L-never" : all[pick % all.length]!;
  }

  /**
   * The job and token a lease-fenced command uses. `tokenPick` −1 means "a
   * running job with its current token" (the `jobPick`-th running job), so
   * that completions and failures actually free slots; otherwise the
   * `jobPick`-th job with `pickToken`.
   */
  pickLeased(jobPick: number, tokenPick: number): { id: number; leaseToken: string } {
    if (tokenPick < 0) {
      const running = [...this.store.jobs.values()].filter((j) => j.state === "running").sort((a, b) => a.id - b.id);
      const j = running[jobPick % Math.max(1, running.length)];
      if (j) return { id: j.id, leaseToken: j.leaseToken! };
    }
    const id = this.pickJob(jobPick)!;
    return { id, leaseToken: this.pickToken(id, Math.max(0, tokenPick)) };
  }

  /**
   * The concurrency key an outcome item names for job `id`: on even picks
   * the job's key as a worker knows it from its claim (a string, or null for
   * none: the adapter's batched paths), on odd picks none named (undefined:
   * the adapter reads the key itself). Both must reach the model's state.
   */
  keyAsNamed(id: number, pick: number): { concurrencyKey?: string | null } {
    return pick % 2 === 0 ? { concurrencyKey: this.store.jobs.get(id)?.concurrencyKey ?? null } : {};
  }

  recordToken(id: number, token: string): void {
    const all = this.tokens.get(id) ?? [];
    all.push(token);
    this.tokens.set(id, all);
  }
}

/** The real side: one adapter on a real database. */
export interface RealSystem {
  readonly adapter: DocketAdapter;
}

export function fail(label: string, lines: string[]): never {
  throw new Error(`${label}: the adapter disagrees with the reference model\n  ${lines.join("\n  ")}`);
}

/** Compares one adapter result with the model's. */
export function expectSame(label: string, model: ModelJob | null, actual: JobRecord | null): void {
  const d = diffJob(model, actual === null ? null : toModelJob(actual));
  if (d.length > 0) fail(label, [`returned:`, ...d]);
}

/** Compares a `settle` result with the model's job, on the columns an outcome writes (SettledJob). */
export function expectSameSettled(label: string, model: ModelJob | null, actual: SettledJob | null): void {
  if (model === null || actual === null) {
    if (model !== actual) fail(label, [`returned: ${actual === null ? "null" : `#${actual.id} ${actual.state}`}, model says ${model === null ? "null" : `#${model.id} ${model.state}`}`]);
    return;
  }
  const lines = SETTLED_FIELDS.filter((f) => model[f] !== actual[f]).map((f) => `${f}: model ${JSON.stringify(model[f])} ≠ actual ${JSON.stringify(actual[f])}`);
  if (lines.length > 0) fail(label, ["returned:", ...lines]);
}

/** The columns of SettledJob that the model owns. */
const SETTLED_FIELDS = ["id", "state", "attempt", "runAt", "updatedAt", "finishedAt", "lastError", "leaseToken", "leaseExpiresAt"] as const satisfies readonly (keyof SettledJob & keyof ModelJob)[];

/** Compares two result lists (order matters). */
export function expectSameList(label: string, model: readonly ModelJob[], actual: readonly JobRecord[]): void {
  const ids = (l: readonly { id: number }[]) => l.map((j) => j.id).join(",");
  if (ids(model) !== ids(actual)) fail(label, [`returned ids [${ids(actual)}], model says [${ids(model)}]`]);
  model.forEach((m, i) => expectSame(`${label} (job #${m.id})`, m, actual[i]!));
}

/** Compares the whole stored table with the model (run after every command). */
export async function expectSameStore(label: string, m: ModelState, r: RealSystem): Promise<void> {
  const rows = await r.adapter.list({ limit: 10_000 });
  const model = m.store.all();
  const lines: string[] = [];
  if (rows.length !== model.length) lines.push(`${rows.length} rows stored, model has ${model.length}`);
  for (const mj of model) {
    const row = rows.find((x) => x.id === mj.id) ?? null;
    for (const d of diffJob(mj, row === null ? null : toModelJob(row))) lines.push(`job #${mj.id} ${d}`);
  }
  if (lines.length > 0) fail(`${label} (stored state after the step)`, lines);
}
