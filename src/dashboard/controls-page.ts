import type { DocketStats, KeyStats } from "../client/stats.ts";
import { html, type Html } from "./html.ts";
import { jobsHref, type JobFilter, type View } from "./pages.ts";

/** A count as a link to the jobs it counts (`filter`), or a plain "0". */
function counted(n: number, filter: JobFilter, v: View): Html | string {
  return n === 0 ? "0" : html`<a href="${jobsHref(v.base, filter)}">${n}</a>`;
}

/** Free slots under `cap` with `running` taken, "full" when none. */
function room(cap: number, running: number): string {
  return running >= cap ? "full" : String(cap - running);
}

function keysTable(keys: KeyStats[], keysShown: number, v: View): Html {
  if (keys.length === 0) return html`<p class="muted">No key has jobs in use or waiting.</p>`;
  return html`<table id="control-keys"><tr><th>key</th><th>limit</th><th>slots in use</th><th>running</th><th>ready</th><th>blocked</th></tr>
${keys.map((k) => html`<tr data-key="${k.key}"><td><a href="${jobsHref(v.base, { key: k.key })}">${k.key}</a></td><td class="n">${k.limit ?? "–"}</td><td class="n">${k.holders}</td><td class="n">${counted(k.running, { state: "running", key: k.key }, v)}</td><td class="n">${counted(k.holders - k.running, { state: "ready", key: k.key }, v)}</td><td class="n">${counted(k.blocked, { state: "blocked", key: k.key }, v)}</td></tr>`)}</table>
${keys.length >= keysShown ? html`<p class="muted">The first ${keysShown} keys by name.</p>` : ""}`;
}

/**
 * The flow controls as they stand in `s`: each concurrency key (limit,
 * slots in use, its running, ready and blocked jobs), each queue and task
 * cap (cap, running, free slots, ready jobs), and a link to the overview's
 * rate limits. Every non-zero count links to the job list of those jobs.
 * `keysShown`: the most keys `s` holds (StatsOptions.keysLimit).
 */
export function controlsPage(s: DocketStats, keysShown: number, v: View): Html {
  const queues = s.queues.filter((q) => q.maxRunning !== null);
  const tasks = s.tasks.filter((t) => t.maxRunning !== null);
  const caps = (scope: "queue" | "task", rows: { name: string; cap: number; running: number; ready: number }[]) =>
    rows.length === 0
      ? html`<p class="muted">No ${scope} caps.</p>`
      : html`<table id="${scope}-caps"><tr><th>${scope}</th><th>cap</th><th>running</th><th>free slots</th><th>ready</th></tr>
${rows.map((r) => html`<tr data-${scope}="${r.name}"><td>${r.name}</td><td class="n">${r.cap}</td><td class="n">${counted(r.running, { state: "running", [scope]: r.name }, v)}</td><td class="n">${room(r.cap, r.running)}</td><td class="n">${counted(r.ready, { state: "ready", [scope]: r.name }, v)}</td></tr>`)}</table>`;
  const rates = s.rateLimits.length === 0 ? html`<p class="muted">No rate limits.</p>` : html`<p>${s.rateLimits.length} rate limit(s): <a id="rate-limits-link" href="${v.base}#rate-limits">on the overview</a>.</p>`;
  return html`<h2>Concurrency keys</h2>${keysTable(s.keys, keysShown, v)}
<h2>Queue caps</h2>${caps("queue", queues.map((q) => ({ name: q.queue, cap: q.maxRunning!, running: q.counts.running, ready: q.counts.ready })))}
<h2>Task caps</h2>${caps("task", tasks.map((t) => ({ name: t.task, cap: t.maxRunning!, running: t.counts.running, ready: t.counts.ready })))}
<h2>Rate limits</h2>${rates}`;
}
