/**
 * What `ctx.signal.reason` is when a handler's signal aborts: one of these
 * three, so that a handler can tell its own time limit, a lost lease and a
 * shutdown apart (`instanceof`) and, say, checkpoint only on shutdown.
 */

/** The attempt ran past its time limit (`timeoutMs`); the attempt fails with this error. */
export class JobTimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`attempt timed out after ${timeoutMs} ms (timeoutMs)`);
    this.name = "JobTimeoutError";
  }
}

/**
 * The attempt no longer holds the job's lease: the job was cancelled
 * (`cancelled` true), or cancelled or reclaimed after the lease expired
 * (false: not known which). Nothing the handler does now is recorded.
 */
export class JobLeaseLostError extends Error {
  constructor(readonly cancelled: boolean) {
    super(`lease lost: the job was ${cancelled ? "cancelled" : "cancelled or reclaimed"}`);
    this.name = "JobLeaseLostError";
  }
}

/** The worker is stopping (`stop()`, `close()`, a signal): a handler that returns within the stop's timeout has its success recorded; one that throws, or runs past it, has its job released (its attempt not spent). */
export class WorkerStoppingError extends Error {
  constructor() {
    super("worker stopping");
    this.name = "WorkerStoppingError";
  }
}
