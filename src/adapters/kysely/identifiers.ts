import { InvalidArgumentError } from "../../core/errors.ts";
import { shown } from "../../core/shown.ts";

const TABLE_PREFIX = /^[a-z_][a-z0-9_]{0,39}$/;

/**
 * Validates a table prefix: "" or lower-case letters, digits and
 * underscores, not starting with a digit, at most 40 characters (or
 * `maxLength`, an engine's bound: see MYSQL_MAX_TABLE_PREFIX). It is
 * interpolated into DDL, so nothing else is accepted; lower case only,
 * because PostgreSQL folds the unquoted names of DDL to lower case while
 * queries quote them, so "Docket_" would name other tables than it created.
 */
export function validateTablePrefix(value: unknown, maxLength = 40, engine = ""): string {
  if (value === "") return value;
  if (typeof value !== "string" || !TABLE_PREFIX.test(value)) {
    throw new InvalidArgumentError(`tablePrefix must match ${TABLE_PREFIX.source} (lower case, at most 40 characters) or be "", got ${shown(value)}`);
  }
  if (value.length > maxLength) {
    throw new InvalidArgumentError(`tablePrefix must be at most ${maxLength} characters on ${engine} (its longest schema name must fit the engine's identifiers), got ${value.length}: ${shown(value)}`);
  }
  return value;
}

export interface TableNames {
  jobs: string;
  migrations: string;
  /** Concurrency keys and their limits. */
  keys: string;
  /** Per-queue controls: pause, cap and rate limit. */
  queues: string;
  /** Per-task controls: cap and rate limit. */
  tasks: string;
  /** Rate keys and their limits. */
  rateKeys: string;
  /** Recurring jobs. */
  schedules: string;
  /** Fairness keys of fair queues, with their weights and turn states. */
  fairKeys: string;
  /** Dependencies: one row per (child, parent) edge. */
  deps: string;
  /** The worker registry: one row per running worker, heartbeated. */
  workers: string;
}

/** Table names for a prefix (the empty prefix is allowed). */
export function tableNames(prefix: string): TableNames {
  validateTablePrefix(prefix);
  return {
    jobs: `${prefix}jobs`,
    migrations: `${prefix}migrations`,
    keys: `${prefix}concurrency_keys`,
    rateKeys: `${prefix}rate_keys`,
    queues: `${prefix}queues`,
    tasks: `${prefix}tasks`,
    schedules: `${prefix}schedules`,
    fairKeys: `${prefix}fair_keys`,
    deps: `${prefix}job_deps`,
    workers: `${prefix}workers`,
  };
}
