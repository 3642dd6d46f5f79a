/** One worker process of a peer in the drain benchmark; the protocol of bench/drain-child.ts. */
import { createInterface } from "node:readline";
import { startPeer, type PeerName } from "./peers.ts";
import { loopDelayMonitor, wallNow } from "./children.ts";

const [peer, url, concurrencyArg] = process.argv.slice(2);
let done = 0;
let doneAt = 0;
const loopDelay = loopDelayMonitor();
let reported = 0;
const say = (m: object) => process.stdout.write(JSON.stringify(m) + "\n");
let worker: { stop(): Promise<void> } | null = null;
const progress = setInterval(() => {
  if (done !== reported) say({ progress: true, n: (reported = done), at: doneAt, rssMb: 0 });
}, 20);
say({ ready: true });
for await (const line of createInterface({ input: process.stdin })) {
  const m = JSON.parse(line) as { go?: boolean; stop?: boolean };
  if (m.go) loopDelay.start();
  if (m.go) worker = await startPeer(peer as PeerName, url!, Number(concurrencyArg), (n) => {
      done += n;
      doneAt = wallNow();
    });
  if (m.stop) {
    const loopDelayMaxMs = loopDelay.stop();
    await worker?.stop();
    clearInterval(progress);
    say({ progress: true, n: done, at: doneAt, rssMb: 0 });
    say({ done: true, succeeded: done, statements: 0, commits: 0, loopDelayMaxMs });
    process.exit(0);
  }
}
