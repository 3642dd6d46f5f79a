import type { Compilable, CompiledQuery } from "kysely";

/** Where a value goes that a cached statement takes anew at each execution (see `compiledOnce`). */
export class Slot {
  constructor(readonly name: string) {}
}

/**
 * What a statement that finds jobs by a predicate passes as `onCompile`
 * (the claim, the completion, the release of waiting children):
 * nothing, so the engine does not prepare it and the server plans it at each
 * run (see EngineHooks.prepare). On PostgreSQL a named statement's generic
 * plan made while the jobs table was nearly empty kept scanning the whole
 * table for every claim and completion after a burst of 100,000 jobs
 * (test/postgres/plans.test.ts).
 */
export const PLANNED_EACH_RUN = undefined;

/** How many statements one cache keeps; past that it starts over (keys are few: one per worker's queue and task set). */
const MAX_ENTRIES = 64;

/**
 * The statement `build` makes for `key`, compiled once and kept in `cache`,
 * with each `Slot` among its parameters replaced by `values[slot.name]`.
 * Assumes the statement's text depends only on `key` (with the slots as
 * parameters; kysely passes a value object through as one parameter) and
 * that the kysely instance's plugins do not change between calls.
 * `onCompile` sees each text compiled (the engine's `prepare`).
 */
export function compiledOnce(
  cache: Map<string, CompiledQuery>,
  key: string,
  build: () => Compilable,
  values: Readonly<Record<string, unknown>>,
  onCompile?: (sql: string) => void,
): CompiledQuery {
  let compiled = cache.get(key);
  if (compiled === undefined) {
    compiled = build().compile();
    onCompile?.(compiled.sql);
    if (cache.size >= MAX_ENTRIES) cache.clear();
    cache.set(key, compiled);
  }
  const parameters = compiled.parameters.map((p) => (p instanceof Slot ? values[p.name] : p));
  return { ...compiled, parameters };
}
