import { InvalidArgumentError } from "../../core/errors.ts";

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,39}$/;

/**
 * Validates a table prefix (or schema name): letters, digits and underscores,
 * not starting with a digit, at most 40 characters. It is interpolated into
 * DDL, so nothing else is accepted.
 */
export function validateIdentifier(value: string, what: string): string {
  if (typeof value !== "string" || !IDENTIFIER.test(value)) {
    throw new InvalidArgumentError(`${what} must match ${IDENTIFIER.source}, got ${JSON.stringify(value)}`);
  }
  return value;
}

export interface TableNames {
  jobs: string;
  migrations: string;
  /** Concurrency keys and their limits. */
  keys: string;
  /** Per-queue controls: pause and cap. */
  queues: string;
  /** Per-task controls: cap. */
  tasks: string;
  /** Recurring jobs. */
  schedules: string;
}

/** Table names for a prefix (the empty prefix is allowed). */
export function tableNames(prefix: string): TableNames {
  if (prefix !== "") validateIdentifier(prefix, "tablePrefix");
  return {
    jobs: `${prefix}jobs`,
    migrations: `${prefix}migrations`,
    keys: `${prefix}concurrency_keys`,
    queues: `${prefix}queues`,
    tasks: `${prefix}tasks`,
    schedules: `${prefix}schedules`,
  };
}
