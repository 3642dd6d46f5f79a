import { shown } from "./shown.ts";

/**
 * Every error docket throws is a DocketError with a stable `code`. Native
 * driver errors never cross the adapter interface; they ride along as
 * `cause` of an AdapterError.
 */
export type DocketErrorCode =
  | "INVALID_ARGUMENT"
  | "INVALID_PAYLOAD"
  | "PAYLOAD_TOO_LARGE"
  | "UNKNOWN_TASK"
  | "NOT_FOUND"
  | "INVALID_STATE"
  | "SCHEMA_TOO_NEW"
  | "SCHEMA_MISSING"
  | "ADAPTER_ERROR"
  | "CLOSED"
  | "LEASE_LOST"
  | "WAIT_TIMEOUT"
  | "IDEMPOTENCY_CONFLICT"
  | "UNSUPPORTED";

export class DocketError extends Error {
  readonly code: DocketErrorCode;
  constructor(code: DocketErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** An option or argument is out of range or of the wrong type. Nothing was written. */
export class InvalidArgumentError extends DocketError {
  constructor(message: string) {
    super("INVALID_ARGUMENT", message);
  }
}

/** The payload cannot be stored as JSON. Nothing was written. */
export class InvalidPayloadError extends DocketError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("INVALID_PAYLOAD", message, options);
  }
}

/** The serialized payload exceeds `maxPayloadBytes`, or the database's own lower limit (`why` says so). Nothing was written. */
export class PayloadTooLargeError extends DocketError {
  readonly bytes: number;
  readonly limit: number;
  constructor(bytes: number, limit: number, why?: string) {
    super("PAYLOAD_TOO_LARGE", `payload is ${bytes} bytes; the limit is ${limit} bytes${why === undefined ? "" : ` (${why})`}`);
    this.bytes = bytes;
    this.limit = limit;
  }
}

/** The task name is empty, or tasks are registered and this one is not. Nothing was written. */
export class UnknownTaskError extends DocketError {
  readonly task: string;
  constructor(task: string, message?: string) {
    super("UNKNOWN_TASK", message ?? `unknown task ${shown(task)}`);
    this.task = task;
  }
}

/** No job with this id exists. */
export class NotFoundError extends DocketError {
  readonly id: number;
  constructor(id: number, message?: string) {
    super("NOT_FOUND", message ?? `job ${id} not found`);
    this.id = id;
  }
}

/** The job exists but is not in a state the operation accepts. Nothing was written. */
export class InvalidStateError extends DocketError {
  readonly id: number;
  readonly state: string;
  constructor(id: number, state: string, operation: string) {
    super("INVALID_STATE", `cannot ${operation} job ${id}: it is ${state}`);
    this.id = id;
    this.state = state;
  }
}

/** The database was migrated by a newer docket; this version refuses to touch it. */
export class SchemaTooNewError extends DocketError {
  constructor(found: number, known: number) {
    super("SCHEMA_TOO_NEW", `database schema is at version ${found}, this docket knows up to ${known}`);
  }
}

/** docket's tables do not exist in this database (or under this table prefix): `migrate()` was not run. */
export class SchemaMissingError extends DocketError {
  readonly table: string;
  constructor(table: string, options?: { cause?: unknown }) {
    super("SCHEMA_MISSING", `table ${table} does not exist: call migrate() (docket.migrate()) before using docket`, options);
    this.table = table;
  }
}

/** The storage failed; the native error is the `cause`. */
export class AdapterError extends DocketError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("ADAPTER_ERROR", message, options);
  }
}

/** The Docket or adapter was closed. */
export class ClosedError extends DocketError {
  constructor(what: string) {
    super("CLOSED", `${what} is closed`);
  }
}

/** The job's lease is no longer held by this attempt (cancelled, reclaimed, finished): nothing was written. */
export class LeaseLostError extends DocketError {
  readonly id: number;
  constructor(id: number, what: string) {
    super("LEASE_LOST", `job ${id}: ${what}: the attempt no longer holds the job's lease (cancelled or reclaimed)`);
    this.id = id;
  }
}

/** A wait ended before the job finished. */
export class WaitTimeoutError extends DocketError {
  readonly id: number;
  constructor(id: number, ms: number) {
    super("WAIT_TIMEOUT", `job ${id} did not finish within ${ms} ms`);
    this.id = id;
  }
}

/**
 * An enqueue named an idempotency key that a job of another task holds (a
 * key names one job across all tasks), or two items of one `enqueueMany`
 * named one key with different tasks. The whole call was refused: nothing
 * was written.
 */
export class IdempotencyConflictError extends DocketError {
  readonly key: string;
  /** The task the refused job was for. */
  readonly task: string;
  /** The holder: its task, and its id (null: an earlier item of the same call). */
  readonly holder: { id: number | null; task: string };
  constructor(key: string, task: string, holder: { id: number | null; task: string }) {
    const by = holder.id === null ? "an earlier item of this call" : `job ${holder.id}`;
    super(
      "IDEMPOTENCY_CONFLICT",
      `idempotency key ${shown(key)} is held by ${by} of task ${shown(holder.task)}, not of task ${shown(task)}: a key names one job across all tasks; nothing was stored`,
    );
    this.key = key;
    this.task = task;
    this.holder = holder;
  }
}

/** The adapter cannot do what was asked (e.g. `ctx.transaction` on the memory adapter, which has no database). Nothing was written. */
export class UnsupportedError extends DocketError {
  constructor(message: string) {
    super("UNSUPPORTED", message);
  }
}
