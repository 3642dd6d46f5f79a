/**
 * Bulk actions from the job list: the links a filtered list offers, the
 * confirmation page that states the exact count, and the filter carried
 * from one to the other. The action is applied to at most that count.
 */
import type { BulkFilter } from "../client/bulk.ts";
import { BULK_ACTIONS, type BulkAction } from "../core/bulk.ts";
import { isJobState } from "../core/states.ts";
import type { DashboardAction } from "./actions.ts";
import { html, type Html } from "./html.ts";
import { FILTER_PARAMS, filterQuery, jobsHref, type JobFilter, type View } from "./pages.ts";

/** The permission each bulk action asks `authorize` for. */
export const BULK_PERMISSION: Record<BulkAction, DashboardAction> = { cancel: "cancel", delete: "delete", "run-now": "run-now", replay: "replay-all" };
const LABEL: Record<BulkAction, string> = { cancel: "Cancel", delete: "Delete", "run-now": "Run now", replay: "Replay" };

/** The job list's filter as a bulk filter; null without a state (a bulk action needs one) or with an error search (a bulk action cannot take one). */
export function bulkFilter(f: JobFilter): BulkFilter | null {
  if (f.state === undefined || !isJobState(f.state) || f.errorContains !== undefined) return null;
  return { state: f.state, ...(f.queue === undefined ? {} : { queue: f.queue }), ...(f.task === undefined ? {} : { task: f.task }), ...(f.key === undefined ? {} : { concurrencyKey: f.key }) };
}

/** The job list's filter (or the one a bulk form or link carries), read from `params`: blank values left out; names trimmed, the error text kept as typed. */
export function filterFrom(params: URLSearchParams): JobFilter {
  const filter: JobFilter = {};
  for (const k of FILTER_PARAMS) {
    const raw = params.get(k) ?? "";
    if (raw.trim() !== "") filter[k] = k === "errorContains" ? raw : raw.trim();
  }
  return filter;
}

const bulkHref = (v: View, action: BulkAction, f: JobFilter) => `${v.base}jobs/bulk?${filterQuery(f, { action })}`;

/** The bulk links a list filtered by state offers: the actions its state allows that this request may take. */
export function bulkLinks(f: JobFilter, v: View): Html {
  const filter = bulkFilter(f);
  if (filter === null) return html``;
  const actions = (Object.keys(BULK_ACTIONS) as BulkAction[]).filter((a) => (BULK_ACTIONS[a] as readonly string[]).includes(filter.state) && v.can.has(BULK_PERMISSION[a]));
  if (actions.length === 0) return html``;
  return html`<p id="bulk">On every job of this list: ${actions.map((a) => html`<a data-bulk="${a}" href="${bulkHref(v, a, f)}">${LABEL[a]} all…</a> `)}</p>`;
}

/** The confirmation: the exact count now, and the button that applies the action to at most that many. */
export function confirmBulk(action: BulkAction, f: JobFilter, count: number, v: View): Html {
  const back = jobsHref(v.base, f);
  if (count === 0) return html`<p class="muted">No job matches.</p><p><a href="${back}">Back to the list</a></p>`;
  const hidden = (["state", "queue", "task", "key"] as const).filter((k) => f[k] !== undefined).map((k) => html`<input type="hidden" name="${k}" value="${f[k]!}">`);
  return html`<p id="confirm">${LABEL[action]} all <strong>${count}</strong> job(s) that are ${f.state}${f.queue ? ` in queue ${f.queue}` : ""}${f.task ? ` of task ${f.task}` : ""}${f.key ? ` under key ${f.key}` : ""}? A job that moved on meanwhile is skipped.</p>
<p><form class="inline" method="post" action="${v.base}jobs/bulk"><input type="hidden" name="csrf" value="${v.csrf}"><input type="hidden" name="action" value="${action}">${hidden}<input type="hidden" name="expected" value="${count}"><button data-action="bulk-${action}">${LABEL[action]} ${count} job(s)</button></form>
<a href="${back}">Cancel</a></p>`;
}
