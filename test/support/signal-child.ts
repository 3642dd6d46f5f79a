/**
 * Child process for the stop-on-signals test: on a SQLite file, enqueues a
 * polite job (ends when its signal aborts) and a stubborn one (never ends),
 * starts a worker with `stopOnSignals()` and prints "running" once both
 * handlers run. Usage: signal-child.ts <file>
 */
import { Docket } from "../../src/client/docket.ts";
import { sqliteAdapter } from "../../src/adapters/sqlite/index.ts";

const [filename] = process.argv.slice(2) as [string];
const docket = new Docket({ adapter: sqliteAdapter({ filename }) });
await docket.migrate();
await docket.enqueue("polite", {});
await docket.enqueue("stubborn", {});
let started = 0;
const worker = docket.worker({
  pollMs: 10,
  shutdownTimeoutMs: 300,
  logger: null,
  handlers: {
    polite: (_p, ctx) =>
      new Promise((_, reject) => {
        if (++started === 2) console.log("running");
        ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason));
      }),
    stubborn: () =>
      new Promise(() => {
        if (++started === 2) console.log("running");
      }),
  },
});
worker.stopOnSignals();
await worker.start();
