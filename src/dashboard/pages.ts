import { attemptRuntime, type Job } from "../core/job.ts";
import { MISSED_COUNT_CAP, type Schedule } from "../core/schedules.ts";
import type { DocketStats } from "../client/stats.ts";
import { TERMINAL_STATES } from "../core/states.ts";
import { MAX_SEARCH_LENGTH } from "../core/validate.ts";
import { Html, action, duration, html, time } from "./html.ts";
import { dependencyGraph } from "./graph.ts";
import type { DashboardAction } from "./actions.ts";

export interface View {
  base: string;
  csrf: string;
  /** The mutations whose buttons are shown: those `authorize` allows this request (none when read-only). */
  can: ReadonlySet<DashboardAction>;
}

const STATES = ["ready", "scheduled", "blocked", "waiting", "running", "succeeded", "dead", "cancelled"] as const;
const ALL_STATES = STATES;

/** Jobs finished per bucket, as an inline SVG bar chart (succeeded green, dead red), with a time axis (UTC) below the bars. */
function throughputChart(s: DocketStats): Html {
  const w = 600;
  const axis = 18;
  const h = 120;
  const n = s.throughput.length;
  const max = Math.max(1, ...s.throughput.map((b) => b.succeeded + b.dead + b.cancelled));
  const bw = w / Math.max(1, n);
  const bars = s.throughput.map((b, i) => {
    const ok = (b.succeeded / max) * (h - 20);
    const bad = ((b.dead + b.cancelled) / max) * (h - 20);
    return html`<rect x="${(i * bw + 1).toFixed(1)}" y="${(h - ok).toFixed(1)}" width="${Math.max(1, bw - 2).toFixed(1)}" height="${ok.toFixed(1)}" fill="#3a9a5b"><title>${time(b.start)}: ${b.succeeded} succeeded</title></rect><rect x="${(i * bw + 1).toFixed(1)}" y="${(h - ok - bad).toFixed(1)}" width="${Math.max(1, bw - 2).toFixed(1)}" height="${bad.toFixed(1)}" fill="#c0392b"><title>${time(b.start)}: ${b.dead} dead, ${b.cancelled} cancelled</title></rect>`;
  });
  const total = s.throughput.reduce((t, b) => t + b.succeeded, 0);
  // Ticks at the first bucket, the middle one and now: hours and minutes (UTC), as the page's other times.
  const clock = (ms: number) => new Date(ms).toISOString().slice(11, 16);
  const ticks = n === 0 ? [] : [[0, s.throughput[0]!.start, "start"], [w / 2, s.throughput[Math.floor(n / 2)]!.start, "middle"], [w - 2, s.at, "end"]] as const;
  const labels = ticks.map(([x, at, anchor]) => html`<text x="${x.toFixed(1)}" y="${h + axis - 5}" font-size="11" fill="#6b7385" text-anchor="${anchor}">${clock(at)}</text>`);
  return html`<svg id="throughput" width="${w}" height="${h + axis}" role="img" aria-label="jobs finished per ${duration(s.bucketMs)}, last ${duration(s.windowMs)}">${bars}<line x1="0" y1="${h}" x2="${w}" y2="${h}" stroke="#b8c0cc"/>${labels}<text x="6" y="14" font-size="11" fill="#6b7385">max ${max} per ${duration(s.bucketMs)}; ${total} succeeded in ${duration(s.windowMs)} (times UTC)</text></svg>`;
}

export function overview(s: DocketStats, schedules: Schedule[], v: View): Html {
  const queues = s.queues.length === 0
    ? html`<p class="muted">No jobs yet.</p>`
    : html`<table id="queues"><tr><th>queue</th>${STATES.map((st) => html`<th>${st === "succeeded" || st === "cancelled" ? `${st} (${duration(s.windowMs)})` : st}</th>`)}<th>oldest ready</th><th>cap</th><th>paused</th>${v.can.has("pause") || v.can.has("resume") ? html`<th></th>` : ""}</tr>
${s.queues.map((q) => html`<tr data-queue="${q.queue}"><td><a href="${jobsHref(v.base, { queue: q.queue })}">${q.queue}</a></td>${STATES.map((st) => html`<td class="n">${q.counts[st] === 0 ? "0" : html`<a href="${jobsHref(v.base, { state: st, queue: q.queue })}">${q.counts[st]}</a>`}</td>`)}<td>${q.counts.ready > 0 ? duration(q.oldestReadyAgeMs) : "–"}</td><td class="n">${q.maxRunning ?? "–"}</td><td>${q.paused ? "paused" : "no"}</td>${
        v.can.has("pause") || v.can.has("resume")
          ? html`<td>${q.paused ? (v.can.has("resume") ? action(v.base, `queues/${encodeURIComponent(q.queue)}/resume`, v.csrf, "Resume", "resume") : "") : v.can.has("pause") ? action(v.base, `queues/${encodeURIComponent(q.queue)}/pause`, v.csrf, "Pause", "pause") : ""}</td>`
          : ""
      }</tr>`)}</table>`;
  const caps = s.tasks.filter((t) => t.maxRunning !== null);
  return html`<h2>Queues</h2>${queues}
<h2>Throughput</h2>${throughputChart(s)}
<h2>Concurrency keys</h2>${s.keys.length === 0 ? html`<p class="muted">No key has jobs in use or waiting.</p>` : html`<table id="keys"><tr><th>key</th><th>limit</th><th>slots in use</th><th>blocked</th></tr>${s.keys.map((k) => html`<tr><td><a href="${jobsHref(v.base, { key: k.key })}">${k.key}</a></td><td class="n">${k.limit ?? "–"}</td><td class="n">${k.holders === 0 ? "0" : k.holders}</td><td class="n">${k.blocked === 0 ? "0" : html`<a href="${jobsHref(v.base, { key: k.key, state: "blocked" })}">${k.blocked}</a>`}</td></tr>`)}</table>`}
<h2>Rate limits</h2>${s.rateLimits.length === 0 ? html`<p class="muted">No rate limits.</p>` : html`<table id="rate-limits"><tr><th>limit of</th><th>name</th><th>limit</th><th>per</th><th>started in window</th><th>waiting</th><th>next start</th></tr>${s.rateLimits.map((r) => html`<tr><td>${r.scope}</td><td>${r.name}</td><td class="n">${r.limit}</td><td>${duration(r.periodMs)}</td><td class="n ${r.used >= r.limit ? "bad" : ""}">${r.used}</td><td class="n">${r.waiting}</td><td>${r.nextStartAt === null ? "now" : `in ${duration(r.nextStartAt - s.at)}`}</td></tr>`)}</table>`}
<h2>Task caps</h2>${caps.length === 0 ? html`<p class="muted">No task caps.</p>` : html`<table id="task-caps"><tr><th>task</th><th>running</th><th>cap</th></tr>${caps.map((t) => html`<tr><td>${t.task}</td><td class="n">${t.counts.running}</td><td class="n">${t.maxRunning}</td></tr>`)}</table>`}
<h2>Running</h2>${s.running.length === 0 ? html`<p class="muted">Nothing is running.</p>` : html`<table id="running"><tr><th>job</th><th>task</th><th>queue</th><th>attempt</th><th>key</th><th>worker</th><th>lease expires</th></tr>${s.running.map((r) => html`<tr><td><a href="${v.base}jobs/${r.id}">#${r.id}</a></td><td>${r.task}</td><td>${r.queue}</td><td class="n">${r.attempt}</td><td>${r.concurrencyKey ?? "–"}</td><td class="worker">${r.worker ?? "–"}</td><td class="${r.leaseExpiresInMs < 0 ? "bad" : ""}">${r.leaseExpiresInMs < 0 ? `expired ${duration(r.leaseExpiresInMs)}` : `in ${duration(r.leaseExpiresInMs)}`}</td></tr>`)}</table>`}
<h2>Recurring jobs</h2>${schedules.length === 0 ? html`<p class="muted">No schedules.</p>` : html`<table id="schedules"><tr><th>name</th><th>cron</th><th>time zone</th><th>task</th><th>last tick</th><th>next tick</th><th>missed</th>${scheduleActionsShown(v) ? html`<th></th>` : ""}</tr>${schedules.map((x) => html`<tr data-schedule="${x.name}"><td>${x.name}</td><td><code>${x.cron}</code></td><td>${x.timezone}</td><td>${x.task}</td><td>${time(x.lastTickAt)}</td><td>${x.paused ? "paused" : time(x.nextTickAt)}</td><td class="${x.missedTicks > 0 ? "bad" : ""}">${missedText(x)}</td>${scheduleActionsShown(v) ? html`<td>${scheduleActions(x, v)}</td>` : ""}</tr>`)}</table>`}`;
}

const scheduleActionsShown = (v: View) => v.can.has("run-schedule") || v.can.has("pause") || v.can.has("resume");

/** A schedule's buttons this request may use: run now, and pause or resume. */
function scheduleActions(x: Schedule, v: View): Html[] {
  const at = (act: string) => `schedules/${encodeURIComponent(x.name)}/${act}`;
  return [
    v.can.has("run-schedule") ? action(v.base, at("run"), v.csrf, "Run now", "run-schedule") : null,
    x.paused && v.can.has("resume") ? action(v.base, at("resume"), v.csrf, "Resume", "resume-schedule") : null,
    !x.paused && v.can.has("pause") ? action(v.base, at("pause"), v.csrf, "Pause", "pause-schedule") : null,
  ].filter((b): b is Html => b !== null);
}

/** A schedule's missed ticks: none, or how many since when (no scheduler ran then). */
function missedText(x: Schedule): string {
  if (x.missedTicks === 0) return "none";
  return `${x.missedTicks}${x.missedTicks >= MISSED_COUNT_CAP ? "+" : ""} since ${time(x.firstMissedAt)} (no scheduler ran)`;
}

/** The dead jobs shown (at most a page of them), and how many there are in all. */
/** The job list's address for `filter` from `after` on. */
export function jobsHref(base: string, filter: JobFilter, after?: number): string {
  const q = filterQuery(filter);
  if (after !== undefined) q.set("after", String(after));
  const query = q.toString();
  return `${base}jobs${query === "" ? "" : `?${query}`}`;
}

/** `filter` as query parameters (state, queue, task, key, errorContains), after `first` (pairs that lead the query). */
export function filterQuery(filter: JobFilter, first: Record<string, string> = {}): URLSearchParams {
  const q = new URLSearchParams(first);
  for (const k of FILTER_PARAMS) if (filter[k] !== undefined) q.set(k, filter[k]!);
  return q;
}

export interface JobFilter {
  state?: string;
  queue?: string;
  task?: string;
  /** A concurrency key. */
  key?: string;
  /** Text the last error contains (ListOptions.errorContains), kept as typed. */
  errorContains?: string;
}

/** The job list's query parameters, named as JobFilter's fields. */
export const FILTER_PARAMS = ["state", "queue", "task", "key", "errorContains"] as const;

/** The states an error search looks in (the default first): jobs that failed, are retrying after a failure, or finished after one. */
export const ERROR_SEARCH_STATES = ["dead", "scheduled", "cancelled", "succeeded"] as const;

/**
 * One page of jobs matching `filter`, oldest id first (keyset: the next
 * page starts after this page's last id), with the filter as a form and a
 * link to the next page when this one is full.
 */
export function jobList(jobs: Job[], filter: JobFilter, pageSize: number, v: View): Html {
  const options = (values: readonly string[], selected: string | undefined) =>
    [html`<option value="">any</option>`, ...values.map((x) => html`<option value="${x}" ${x === selected ? new Html("selected") : ""}>${x}</option>`)];
  const form = html`<form method="get" action="${v.base}jobs" id="filter">state <select name="state" aria-label="state">${options(ALL_STATES, filter.state)}</select>
 queue <input name="queue" value="${filter.queue ?? ""}" size="14" aria-label="queue"> task <input name="task" value="${filter.task ?? ""}" size="14" aria-label="task"> key <input name="key" value="${filter.key ?? ""}" size="14" aria-label="concurrency key">
 last error contains <input name="errorContains" value="${filter.errorContains ?? ""}" size="20" maxlength="${MAX_SEARCH_LENGTH}" aria-label="last error contains" aria-describedby="error-search-help"> <button>Filter</button>
 <small id="error-search-help" class="muted">(searched in ${ERROR_SEARCH_STATES[0]} jobs unless the state is ${ERROR_SEARCH_STATES.slice(1, -1).join(", ")} or ${ERROR_SEARCH_STATES.at(-1)})</small></form>`;
  const searching = filter.errorContains !== undefined;
  const rows = jobs.map((j) => html`<tr data-job="${j.id}"><td><a href="${v.base}jobs/${j.id}">#${j.id}</a></td><td>${j.state}</td><td>${j.task}</td><td>${j.queue}</td><td class="n">${j.attempt}/${j.maxAttempts}</td><td>${j.concurrencyKey ?? "–"}</td><td>${time(j.runAt)}</td><td>${time(j.updatedAt)}</td>${searching ? html`<td class="last-error"><pre>${(j.lastError ?? "").split("\n")[0]}</pre></td>` : ""}</tr>`);
  const next = jobs.length === pageSize ? html`<p><a id="next" href="${jobsHref(v.base, filter, jobs[jobs.length - 1]!.id)}">Next ${pageSize} →</a></p>` : "";
  return html`${form}${jobs.length === 0 ? html`<p class="muted">No jobs match.</p>` : html`<table id="jobs"><tr><th>job</th><th>state</th><th>task</th><th>queue</th><th>attempts</th><th>key</th><th>due</th><th>last change</th>${searching ? html`<th>last error</th>` : ""}</tr>${rows}</table>`}${next}`;
}

export function deadLetters(jobs: Job[], total: number, v: View): Html {
  if (jobs.length === 0) return html`<p class="muted">No dead jobs.</p>`;
  const replay = v.can.has("replay");
  return html`<p id="dead-count">${total} dead job(s)${total > jobs.length ? `, the ${jobs.length} most recent shown` : ""}.</p>
<form method="get" action="${v.base}jobs" id="dead-search"><input type="hidden" name="state" value="dead">last error contains <input name="errorContains" size="24" maxlength="${MAX_SEARCH_LENGTH}" aria-label="last error contains"> <button>Search dead jobs</button></form>
${v.can.has("replay-all") ? html`<p><a id="replay-all" href="${v.base}dead/replay-all">Replay all ${total}…</a></p>` : ""}
<table id="dead"><tr><th>job</th><th>task</th><th>queue</th><th>attempts</th><th>died</th><th>last error</th>${replay ? html`<th></th>` : ""}</tr>
${jobs.map((j) => html`<tr data-job="${j.id}"><td><a href="${v.base}jobs/${j.id}">#${j.id}</a></td><td>${j.task}</td><td>${j.queue}</td><td class="n">${j.attempt}/${j.maxAttempts}</td><td>${time(j.finishedAt)}</td><td><pre>${(j.lastError ?? "").split("\n")[0]}</pre></td>${replay ? html`<td>${action(v.base, `dead/${j.id}/replay`, v.csrf, "Replay", "replay")}</td>` : ""}</tr>`)}</table>`;
}

/** The confirmation of a bulk replay: the exact count now, and the button that replays them. */
export function confirmReplayAll(total: number, v: View): Html {
  if (total === 0) return html`<p class="muted">No dead jobs.</p><p><a href="${v.base}dead">Back to the dead letters</a></p>`;
  return html`<p id="confirm">Replay all <strong>${total}</strong> dead job(s)? Each is due again now, its attempts reset (scheduled until a worker admits it).</p>
<p><form class="inline" method="post" action="${v.base}dead/replay-all"><input type="hidden" name="csrf" value="${v.csrf}"><input type="hidden" name="expected" value="${total}"><button name="replay-all" data-action="replay-all">Replay ${total} job(s)</button></form>
<a href="${v.base}dead">Cancel</a></p>`;
}

/** A refused or failed request, inside the layout, with the way back. */
export function refusal(reason: string, back: string): Html {
  return html`<p id="refusal">${reason}</p><p><a href="${back}">Back</a></p>`;
}

export function jobDetail(j: Job, v: View, deps: { parents: Job[]; children: Job[] } = { parents: [], children: [] }, now = Date.now()): Html {
  return html`<table id="job"><tr><th>state</th><td id="state">${j.state}</td></tr><tr><th>task</th><td>${j.task}</td></tr><tr><th>queue</th><td>${j.queue}</td></tr>
<tr><th>attempts</th><td>${j.attempt} of ${j.maxAttempts}</td></tr><tr><th>priority</th><td>${j.priority}</td></tr>
<tr><th>concurrency key</th><td>${j.concurrencyKey ?? "–"}</td></tr><tr><th>idempotency key</th><td>${j.idempotencyKey ?? "–"}</td></tr>
<tr><th>rate key</th><td>${j.rateKey ?? "–"}</td></tr><tr><th>fairness key</th><td>${j.fairKey ?? "–"}</td></tr><tr><th>debounce key</th><td>${j.debounceKey ?? "–"}</td></tr>
<tr><th>worker</th><td id="worker">${j.worker ?? "–"}</td></tr><tr><th>lease expires</th><td>${time(j.leaseExpiresAt)}</td></tr>
<tr><th>started</th><td id="started">${time(j.startedAt)}</td></tr><tr><th>runtime</th><td id="runtime">${runtimeText(j, now)}</td></tr></table>
${dependencyGraph(j, deps, v.base)}
<h2>Payload</h2><pre id="payload">${JSON.stringify(j.payload, null, 2)}</pre>
<h2>Result</h2><pre id="result">${JSON.stringify(j.result, null, 2)}</pre>
<h2>Progress</h2><pre>${JSON.stringify(j.progress, null, 2)}</pre>
<h2>Steps</h2>${j.steps.length === 0 ? html`<p class="muted">No step recorded.</p>` : html`<table id="steps"><tr><th>step</th><th>recorded</th><th>result</th></tr>${j.steps.map((s) => html`<tr><td>${s.name}</td><td>${time(s.at)}</td><td><pre>${JSON.stringify(s.result, null, 2)}</pre></td></tr>`)}</table>`}
<h2>Last error</h2><pre id="error">${j.lastError ?? "–"}</pre>
<h2>Failed attempts</h2>${j.errors.length === 0 ? html`<p class="muted">No attempt failed.</p>` : html`<table id="errors"><tr><th>attempt</th><th>failed</th><th>worker</th><th>error</th></tr>${j.errors.map((e) => html`<tr><td class="n">${e.attempt}</td><td>${time(e.at)}</td><td>${e.worker ?? "–"}</td><td><pre>${e.error}</pre></td></tr>`)}</table>`}
<h2>Timeline</h2><table id="timeline">${timeline(j).map(([k, t]) => html`<tr><th>${k}</th><td>${time(t)}</td></tr>`)}</table>
${jobActions(j, v)}`;
}

/** The buttons of the actions this request may take on `j` in its state: cancel a live job, run a scheduled one now, replay a dead one, delete a finished one. */
function jobActions(j: Job, v: View): Html {
  const buttons = [
    v.can.has("run-now") && j.state === "scheduled" ? action(v.base, `jobs/${j.id}/run-now`, v.csrf, j.attempt > 0 ? "Retry now" : "Run now", "run-now") : null,
    v.can.has("replay") && j.state === "dead" ? action(v.base, `dead/${j.id}/replay`, v.csrf, "Replay", "replay") : null,
    v.can.has("cancel") && !TERMINAL_STATES.includes(j.state) ? action(v.base, `jobs/${j.id}/cancel`, v.csrf, "Cancel", "cancel") : null,
    v.can.has("delete") && TERMINAL_STATES.includes(j.state) ? action(v.base, `jobs/${j.id}/delete`, v.csrf, "Delete", "delete") : null,
  ].filter((b): b is Html => b !== null);
  return buttons.length === 0 ? html`` : html`<p id="actions">${buttons}</p>`;
}

/** The latest attempt's runtime (see attemptRuntime), "running for …" while it runs, or "–". */
function runtimeText(j: Job, now: number): string {
  const ms = attemptRuntime(j, now);
  return ms === null ? "–" : j.state === "running" ? `running for ${duration(ms)}` : duration(ms);
}

/** What happened to a job, in time order: created, each failed attempt, due, last change, finished. */
function timeline(j: Job): [string, number][] {
  const events: [string, number | null][] = [
    ["created", j.createdAt],
    ...j.errors.map((e): [string, number] => [`attempt ${e.attempt} failed${e.worker === null ? "" : ` on ${e.worker}`}: ${e.error.split("\n")[0]}`, e.at]),
    ...j.steps.map((s): [string, number] => [`step ${s.name} recorded`, s.at]),
    [TERMINAL_STATES.includes(j.state) || j.state === "running" ? "last due" : "due", j.runAt],
    [j.attempt > 1 ? `attempt ${j.attempt} started` : "started", j.startedAt],
    ["last change", j.updatedAt],
    ["finished", j.finishedAt],
  ];
  return events.filter((e): e is [string, number] => e[1] !== null).sort((a, b) => a[1] - b[1]);
}
