/**
 * The job page's dependency graph (EnqueueOptions.after): the job's parents,
 * the job, its children, in three columns joined by arrows; each node links
 * to its job's page and shows its task and state. Escaped like every page.
 */
import type { Job } from "../core/job.ts";
import { html, type Html } from "./html.ts";

/** The dependencies section of job `j`'s page. */
export function dependencyGraph(j: Job, deps: { parents: Job[]; children: Job[] }, base: string): Html {
  if (deps.parents.length === 0 && deps.children.length === 0) return html`<h2>Dependencies</h2><p class="muted">No parents or children.</p>`;
  const node = (n: Job, self = false) =>
    html`<a class="node s-${n.state}${self ? " self" : ""}" href="${base}jobs/${n.id}" data-job="${n.id}">#${n.id} ${n.task}<br><small>${n.state}</small></a>`;
  const column = (jobs: Job[], id: string, none: string) => html`<div class="col" id="${id}">${jobs.length === 0 ? html`<span class="muted">${none}</span>` : jobs.map((n) => node(n))}</div>`;
  return html`<h2>Dependencies</h2><div class="graph">${column(deps.parents, "parents", "no parents")}<div class="arrow">→</div><div class="col">${node(j, true)}</div><div class="arrow">→</div>${column(deps.children, "children", "no children")}</div>`;
}
