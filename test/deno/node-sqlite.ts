import type { NodeSqliteDatabaseSync } from "../../src/adapters/sqlite/index.ts";

/**
 * `node:sqlite`'s DatabaseSync, typed by the part these tests use. Deno has
 * the module built in, but `deno check` takes `node:` types from this
 * repository's @types/node, pinned to 20 (the oldest Node docket supports),
 * which predates `node:sqlite`; a literal `import ... from "node:sqlite"`
 * therefore fails to type-check here (it runs fine), and a `// @ts-types`
 * directive is ignored for `node:` specifiers. A project without that pin
 * imports it directly.
 */
export interface DatabaseSync extends NodeSqliteDatabaseSync {
  readonly isOpen: boolean;
  exec(sql: string): void;
}

const specifier = "node:sqlite";
export const { DatabaseSync } = (await import(specifier)) as {
  DatabaseSync: new (path: string, options?: { timeout?: number }) => DatabaseSync;
};
