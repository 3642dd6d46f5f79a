/** Resolves on the next macrotask turn (setImmediate where the runtime has it), after the pending I/O callbacks and promise jobs. */
export function nextTurn(): Promise<void> {
  const immediate = (globalThis as { setImmediate?: (fn: () => void) => unknown }).setImmediate;
  return new Promise((resolve) => (immediate ? immediate(resolve) : setTimeout(resolve, 0)));
}
