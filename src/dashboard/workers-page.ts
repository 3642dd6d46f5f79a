import type { WorkerInfo } from "../client/reads.ts";
import { duration, html, time, type Html } from "./html.ts";

/** The registered workers (Docket.workers): each one's identity, queues, concurrency, jobs in hand and heartbeat, as of `now`. */
export function workersPage(workers: WorkerInfo[], now: number): Html {
  if (workers.length === 0) return html`<p class="muted">No worker is running (a crashed worker drops out a lease after its last heartbeat).</p>`;
  const inHand = workers.reduce((n, w) => n + w.jobsInHand, 0);
  return html`<p id="worker-count">${workers.length} worker(s), ${inHand} job(s) in hand.</p>
<table id="workers"><tr><th>name</th><th>id</th><th>host</th><th>pid</th><th>queues</th><th>concurrency</th><th>jobs in hand</th><th>started</th><th>last heartbeat</th></tr>
${workers.map((w) => html`<tr data-worker="${w.id}"><td>${w.name}</td><td><code>${w.id}</code></td><td>${w.host}</td><td class="n">${w.pid}</td><td>${w.queues.join(", ")}</td><td class="n">${w.concurrency}</td><td class="n">${w.jobsInHand}</td><td>${time(w.startedAt)}</td><td>${duration(w.heartbeatAt - now)}</td></tr>`)}</table>`;
}
