/** The signals `worker.stopOnSignals()` listens to by default. */
export const SHUTDOWN_SIGNALS = ["SIGINT", "SIGTERM"] as const;
/** Every signal `stopOnSignals` may listen to: those that ask a process to end and can be caught (not SIGKILL or SIGSTOP). */
export const STOPPABLE_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR2"] as const;
export type ShutdownSignal = (typeof STOPPABLE_SIGNALS)[number];

interface DenoSignals {
  addSignalListener(signal: string, handler: () => void): void;
  removeSignalListener(signal: string, handler: () => void): void;
  kill(pid: number, signal: string): void;
  pid: number;
}

interface NodeProcess {
  on(signal: string, handler: () => void): void;
  off(signal: string, handler: () => void): void;
  listenerCount(signal: string): number;
  kill(pid: number, signal: string): void;
  pid: number;
}

/**
 * Listens once to any of `signals` (Node's `process`, or Deno's signal API).
 * `handler` gets the signal that arrived; by then every listener this call
 * added is removed again, so a second signal gets the runtime's default
 * (or the application's own) behaviour. Returns an unsubscribe function.
 */
export function onceOnSignals(signals: readonly ShutdownSignal[], handler: (signal: ShutdownSignal) => void): () => void {
  const deno = (globalThis as { Deno?: DenoSignals }).Deno;
  const proc = (globalThis as { process?: NodeProcess }).process;
  const listeners = new Map<ShutdownSignal, () => void>();
  const remove = () => {
    for (const [signal, listener] of listeners) {
      if (deno) deno.removeSignalListener(signal, listener);
      else proc?.off(signal, listener);
    }
    listeners.clear();
  };
  try {
    for (const signal of signals) {
      const listener = () => {
        remove();
        handler(signal);
      };
      listeners.set(signal, listener);
      if (deno) deno.addSignalListener(signal, listener);
      else if (proc) proc.on(signal, listener);
    }
  } catch (error) {
    // All or none: a signal the runtime refuses leaves no listener behind.
    remove();
    throw error;
  }
  return remove;
}

/**
 * Delivers `signal` to this process again, so that it ends as it would have
 * without docket's listener, unless the application listens to it itself.
 */
export function reraise(signal: ShutdownSignal): void {
  const deno = (globalThis as { Deno?: DenoSignals }).Deno;
  const proc = (globalThis as { process?: NodeProcess }).process;
  if (deno) deno.kill(deno.pid, signal);
  else if (proc && proc.listenerCount(signal) === 0) proc.kill(proc.pid, signal);
}
