import type { DocketStats } from "../client/stats.ts";
import type { WorkerInfo } from "../client/reads.ts";
import type { BulkFilter } from "../client/bulk.ts";
import { BULK_ACTIONS, isBulkAction, type BulkAction } from "../core/bulk.ts";
import { BULK_PERMISSION, bulkFilter, bulkLinks, confirmBulk, filterFrom } from "./bulk-page.ts";
import { DocketError, InvalidArgumentError, NotFoundError } from "../core/errors.ts";
import type { Job } from "../core/job.ts";
import { isJobState, type JobState } from "../core/states.ts";
import type { Schedule } from "../core/schedules.ts";
import { DEFAULT_MAX_BODY_BYTES, readForm } from "./form.ts";
import { REFRESH_CHOICES, html, page, type Html } from "./html.ts";
import { readMessages, withMessage } from "./messages.ts";
import { ERROR_SEARCH_STATES, confirmReplayAll, deadLetters, jobDetail, jobList, jobsHref, overview, refusal, type View } from "./pages.ts";
import { workersPage } from "./workers-page.ts";
import { controlsPage } from "./controls-page.ts";
import { HostList, Signer, normalizeBasePath, originChecker } from "./security.ts";

import { MUTATIONS, type DashboardAction } from "./actions.ts";

export type { DashboardAction } from "./actions.ts";
/** Jobs per page of the job list. */
const JOBS_PAGE = 100;
/** Most concurrency keys the controls page lists. */
const KEYS_SHOWN = 100;

export interface DashboardOptions {
  /** The path the dashboard is mounted at, "/ops" or "/ops/" (both serve /ops and /ops/). Default "/". */
  basePath?: string;
  /**
   * Decides each request. Default: viewing is allowed, every mutation is
   * refused (pass an `authorize` that checks your session to allow them).
   * A page shows the buttons of the mutations it allows for that request
   * only; a refused POST gets a page in the dashboard's layout, with a way back.
   */
  authorize?: (request: Request, action: DashboardAction) => boolean | Promise<boolean>;
  /** No mutation buttons, and every POST refused. Default false. */
  readOnly?: boolean;
  /**
   * The origin browsers see when a proxy terminates TLS or renames the host,
   * e.g. "https://ops.example.com": a POST whose Origin is this one is
   * same-site. (The request URL's own origin is always accepted.)
   */
  publicOrigin?: string;
  /** Also accept the origin named by X-Forwarded-Proto and X-Forwarded-Host. Only behind a proxy that sets them. Default false. */
  trustProxy?: boolean;
  /**
   * When set, a request whose Host header is not listed is refused with 421
   * before anything else (defends against DNS rebinding). Entries are
   * "name" (any port) or "name:port". Default: any Host.
   */
  allowedHosts?: readonly string[];
  /**
   * The key (at least 16 bytes) that signs CSRF tokens and banner messages.
   * Instances configured with the same secret accept each other's forms
   * (behind a load balancer, after a restart). Default: random per handler.
   */
  secret?: string | Uint8Array;
  /** A POST body larger than this is refused with 413, unread. Default 65536. */
  maxBodyBytes?: number;
}

export type DashboardHandler = (request: Request) => Promise<Response>;

/** What the dashboard reads and does: a narrow view of a Docket (every Docket is one). */
export interface DashboardSource {
  stats(options?: { keysLimit?: number }): Promise<DocketStats>;
  readonly schedules: { list(): Promise<Schedule[]>; runNow(name: string): Promise<Job>; pause(name: string): Promise<Schedule>; resume(name: string): Promise<Schedule> };
  readonly deadLetters: {
    list(options: { limit: number }): Promise<Job[]>;
    replay(id: number): Promise<Job>;
    replayAll(options: { limit: number }): Promise<{ replayed: number }>;
  };
  get(id: number): Promise<Job | null>;
  dependencies(id: number): Promise<{ parents: Job[]; children: Job[] }>;
  getByIdempotencyKey(key: string): Promise<Job | null>;
  list(options: { state?: JobState; queue?: string; task?: string; concurrencyKey?: string; errorContains?: string; afterId?: number; limit?: number }): Promise<Job[]>;
  pauseQueue(queue: string): Promise<unknown>;
  resumeQueue(queue: string): Promise<unknown>;
  cancel(id: number): Promise<unknown>;
  runNow(id: number): Promise<unknown>;
  deleteJob(id: number): Promise<void>;
  workers(): Promise<WorkerInfo[]>;
  readonly bulk: { count(filter: BulkFilter): Promise<number>; apply(action: BulkAction, filter: BulkFilter, options: { limit: number }): Promise<{ applied: number; skipped: number }> };
}

/**
 * The dashboard as a web-standard handler, `(Request) => Promise<Response>`,
 * for `node:http` (through a small adapter), `Deno.serve`, Hono or Express.
 * Pages are rendered on the server (no script, no build step); mutations
 * are POST forms carrying an HMAC-signed CSRF token (valid for 24 hours on
 * every handler with the same `secret`), refused when the token is missing,
 * forged or expired, when the request's Origin is another site, when
 * read-only, or unless `authorize` allows them. Every value shown is
 * HTML-escaped; the banners show only messages the server signed.
 */
export function dashboard(docket: DashboardSource, options: DashboardOptions = {}): DashboardHandler {
  const base = normalizeBasePath(options.basePath);
  const authorize = options.authorize ?? ((_r: Request, a: DashboardAction) => a === "view");
  const readOnly = options.readOnly ?? false;
  const signer = new Signer(options.secret);
  const origins = originChecker(options);
  const hosts = options.allowedHosts === undefined ? null : new HostList(options.allowedHosts);
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if (!Number.isSafeInteger(maxBody) || maxBody < 1) throw new InvalidArgumentError(`maxBodyBytes must be a positive integer, got ${JSON.stringify(options.maxBodyBytes)}`);

  const respond = (status: number, body: string, headers: Record<string, string> = {}) =>
    new Response(body, {
      status,
      headers: {
        "content-type": "text/html; charset=utf-8",
        "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'",
        "x-content-type-options": "nosniff",
        "referrer-policy": "same-origin",
        "cache-control": "no-store",
        ...headers,
      },
    });
  /** A page of `url`, with its banners and the live refresh switch (`?refresh=<seconds>`, one of REFRESH_CHOICES; off by default). */
  const render = async (title: string, body: Html, url: URL, status = 200) => {
    const asked = Number(url.searchParams.get("refresh") ?? 0);
    const seconds = (REFRESH_CHOICES as readonly number[]).includes(asked) ? asked : 0;
    const href = (n: number) => {
      const next = new URL(url);
      for (const k of ["notice", "error", "sig"]) next.searchParams.delete(k);
      if (n === 0) next.searchParams.delete("refresh");
      else next.searchParams.set("refresh", String(n));
      return `${next.pathname}${next.search}`;
    };
    return respond(status, page({ title, base, body, refresh: { seconds, href }, ...(await readMessages(signer, url)) }));
  };
  /** A refusal inside the layout (status `status`), with a link back to `to`. */
  const refuse = (status: number, reason: string, to: string, headers: Record<string, string> = {}) =>
    respond(status, page({ title: status === 403 ? "Not allowed" : "Refused", base, error: reason, body: refusal(reason, to) }), headers);
  /** The mutations `authorize` allows this request, shown as buttons (none when read-only). */
  const allowed = async (request: Request): Promise<Set<DashboardAction>> => {
    const can = new Set<DashboardAction>();
    if (readOnly) return can;
    for (const a of MUTATIONS) if (await authorize(request, a)) can.add(a);
    return can;
  };
  const deadTotal = async () => (await docket.stats()).queues.reduce((n, q) => n + q.counts.dead, 0);
  const back = async (to: string, message: { notice?: string; error?: string } = {}) => {
    const kind = message.error !== undefined ? "error" : message.notice !== undefined ? "notice" : null;
    const location = kind === null ? to : await withMessage(signer, to, kind, message[kind]!);
    return new Response(null, { status: 303, headers: { location } });
  };

  return async (request: Request): Promise<Response> => {
    if (hosts && !hosts.allows(request.headers.get("host"))) return respond(421, "unknown host");
    const url = new URL(request.url);
    if (!url.pathname.startsWith(base) && url.pathname !== base.slice(0, -1)) return respond(404, "not found");
    const path = url.pathname === base.slice(0, -1) ? "" : url.pathname.slice(base.length);
    try {
      if (request.method === "GET" || request.method === "HEAD") {
        if (!(await authorize(request, "view"))) return respond(403, "forbidden");
        const can = await allowed(request);
        const view: View = { base, csrf: can.size === 0 ? "" : await signer.csrfToken(), can };
        if (path === "") {
          const [stats, schedules] = await Promise.all([docket.stats(), docket.schedules.list()]);
          return render("Overview", overview(stats, schedules, view), url);
        }
        if (path === "dead") {
          const [jobs, total] = await Promise.all([docket.deadLetters.list({ limit: 200 }), deadTotal()]);
          return render("Dead letters", deadLetters(jobs, Math.max(total, jobs.length), view), url);
        }
        if (path === "workers") return render("Workers", workersPage(await docket.workers(), Date.now()), url);
        if (path === "controls") return render("Controls", controlsPage(await docket.stats({ keysLimit: KEYS_SHOWN }), KEYS_SHOWN, view), url);
        if (path === "dead/replay-all") {
          if (!can.has("replay-all")) return refuse(403, "Replaying all dead jobs is not allowed for you here.", `${base}dead`);
          return render("Replay all dead jobs", confirmReplayAll(await deadTotal(), view), url);
        }
        if (path === "jobs/bulk") {
          const action = url.searchParams.get("action");
          const shown = filterFrom(url.searchParams);
          const filter = bulkFilter(shown);
          if (!isBulkAction(action) || filter === null || !(BULK_ACTIONS[action] as readonly string[]).includes(filter.state)) {
            return refuse(400, "A bulk action needs an action its jobs' state allows, and a state (and no error search).", `${base}jobs`);
          }
          if (!can.has(BULK_PERMISSION[action])) return refuse(403, "This action is not allowed for you here.", `${base}jobs`);
          return render("Confirm a bulk action", confirmBulk(action, shown, await docket.bulk.count(filter), view), url);
        }
        if (path === "jobs") {
          const filter = filterFrom(url.searchParams);
          if (filter.state !== undefined && !isJobState(filter.state)) return refuse(400, `No such state: ${filter.state}.`, `${base}jobs`);
          if (filter.errorContains !== undefined) {
            filter.state ??= ERROR_SEARCH_STATES[0];
            if (!(ERROR_SEARCH_STATES as readonly string[]).includes(filter.state)) return refuse(400, `An error search looks in ${ERROR_SEARCH_STATES.join(", ")} jobs, not ${filter.state} ones.`, `${base}jobs`);
          }
          const after = Number(url.searchParams.get("after") ?? 0);
          const { key, ...rest } = filter;
          let jobs: Job[];
          try {
            jobs = await docket.list({ ...(rest as { state?: JobState }), ...(key === undefined ? {} : { concurrencyKey: key }), afterId: Number.isSafeInteger(after) && after > 0 ? after : undefined, limit: JOBS_PAGE });
          } catch (error) {
            if (error instanceof InvalidArgumentError) return refuse(400, error.message, `${base}jobs`);
            throw error;
          }
          const title = ["Jobs", filter.state, filter.queue && `in ${filter.queue}`, filter.task && `of ${filter.task}`, key && `under key ${key}`, filter.errorContains !== undefined && `whose last error contains “${filter.errorContains}”`].filter(Boolean).join(" ");
          return render(title, html`${jobs.length === 0 ? "" : bulkLinks(filter, view)}${jobList(jobs, filter, JOBS_PAGE, view)}`, url);
        }
        const job = /^jobs\/(\d+)$/.exec(path);
        if (job) {
          const found = await docket.get(Number(job[1]));
          return found ? render(`Job #${found.id}`, jobDetail(found, view, await docket.dependencies(found.id)), url) : respond(404, page({ title: "Not found", base, body: emptyBody(`No job ${job[1]}.`) }));
        }
        if (path === "lookup") {
          const q = (url.searchParams.get("q") ?? "").trim();
          const byId = /^\d+$/.test(q) ? await docket.get(Number(q)) : null;
          const byKey = q === "" ? null : await docket.getByIdempotencyKey(q).catch(() => null);
          // A number that is both a job's id and another job's idempotency key: both, to choose from.
          if (byId && byKey && byId.id !== byKey.id) {
            const choice = html`<p>“${q}” names two jobs:</p><ul id="lookup-choices"><li><a href="${base}jobs/${byId.id}">job #${byId.id}</a> (its id)</li><li><a href="${base}jobs/${byKey.id}">job #${byKey.id}</a> (its idempotency key)</li></ul>`;
            return respond(200, page({ title: "Two jobs match", base, query: q, body: choice }));
          }
          const found = byId ?? byKey;
          if (found) return back(`${base}jobs/${found.id}`);
          return respond(404, page({ title: "Not found", base, query: q, error: "no job with that id or idempotency key", body: emptyBody("Nothing matched the lookup.") }));
        }
        return respond(404, page({ title: "Not found", base, body: emptyBody("No such page.") }));
      }
      if (request.method !== "POST") return respond(405, "method not allowed", { allow: "GET, HEAD, POST" });
      const origin = request.headers.get("origin");
      if (origin !== null && !origins(request, url).has(origin)) return refuse(403, "A request from another site was refused.", base);
      const form = await readForm(request, maxBody);
      if (form === "too large") return refuse(413, "The request body is too large.", base, { connection: "close" });
      if (!(await signer.csrfValid(form.get("csrf")))) return refuse(403, "The form's CSRF token is missing, expired or wrong: reload the page and try again.", base);
      if (readOnly) return refuse(403, "This dashboard is read-only.", base);
      const forbidden = (to: string) => refuse(403, "This action is not allowed for you here.", to);
      const queue = /^queues\/([^/]+)\/(pause|resume)$/.exec(path);
      if (queue) {
        const name = decodeURIComponent(queue[1]!);
        const act = queue[2] as "pause" | "resume";
        if (!(await authorize(request, act))) return forbidden(base);
        if (act === "pause") await docket.pauseQueue(name);
        else await docket.resumeQueue(name);
        return back(base, { notice: `queue ${name} ${act === "pause" ? "paused" : "resumed"}` });
      }
      const replay = /^dead\/(\d+)\/replay$/.exec(path);
      if (replay) {
        if (!(await authorize(request, "replay"))) return forbidden(`${base}dead`);
        try {
          const j = await docket.deadLetters.replay(Number(replay[1]));
          return back(`${base}dead`, { notice: `job ${j.id} replayed` });
        } catch (error) {
          if (error instanceof NotFoundError) return back(`${base}dead`, { notice: `job ${replay[1]} is not dead (already replayed?)` });
          throw error;
        }
      }
      if (path === "dead/replay-all") {
        if (!(await authorize(request, "replay-all"))) return forbidden(`${base}dead`);
        // Only from the confirmation page, which stated the count: a bare POST is sent there first; at most that many.
        if (form.get("expected") === null) return back(`${base}dead/replay-all`);
        const expected = /^\d{1,15}$/.test(form.get("expected")!) ? Number(form.get("expected")) : NaN;
        if (!Number.isSafeInteger(expected)) return refuse(400, "Replaying all dead jobs needs the count confirmed.", `${base}dead`);
        const { replayed } = expected === 0 ? { replayed: 0 } : await docket.deadLetters.replayAll({ limit: expected });
        return back(`${base}dead`, { notice: `${replayed} dead job(s) replayed` });
      }
      if (path === "jobs/bulk") {
        const action = form.get("action");
        const shown = filterFrom(form);
        const filter = bulkFilter(shown);
        // Only from the confirmation page, which stated the count.
        const expected = /^\d+$/.test(form.get("expected") ?? "") ? Number(form.get("expected")) : NaN;
        if (!isBulkAction(action) || filter === null || !Number.isSafeInteger(expected)) return refuse(400, "A bulk action needs an action, a state and the count confirmed.", `${base}jobs`);
        if (!(await authorize(request, BULK_PERMISSION[action]))) return forbidden(`${base}jobs`);
        try {
          const { applied, skipped } = await docket.bulk.apply(action, filter, { limit: expected });
          return back(jobsHref(base, shown), { notice: `${action}: ${applied} job(s) done${skipped > 0 ? `, ${skipped} skipped (they had moved on)` : ""}` });
        } catch (error) {
          if (error instanceof DocketError) return back(jobsHref(base, shown), { error: error.message });
          throw error;
        }
      }
      const onJob = /^jobs\/(\d+)\/(cancel|run-now|delete)$/.exec(path);
      if (onJob) {
        const [id, act] = [Number(onJob[1]), onJob[2] as "cancel" | "run-now" | "delete"];
        const at = `${base}jobs/${id}`;
        if (!(await authorize(request, act))) return forbidden(at);
        try {
          if (act === "cancel") await docket.cancel(id);
          if (act === "run-now") await docket.runNow(id);
          if (act !== "delete") return back(at, { notice: act === "cancel" ? "cancelled" : "due now: the next claim takes it" });
          await docket.deleteJob(id);
          return back(`${base}jobs`, { notice: `job ${id} deleted` });
        } catch (error) {
          if (error instanceof DocketError) return back(at, { error: error.message });
          throw error;
        }
      }
      const schedule = /^schedules\/([^/]+)\/(run|pause|resume)$/.exec(path);
      if (schedule) {
        const name = decodeURIComponent(schedule[1]!);
        const act = schedule[2] as "run" | "pause" | "resume";
        if (!(await authorize(request, act === "run" ? "run-schedule" : act))) return forbidden(base);
        try {
          if (act === "pause") await docket.schedules.pause(name);
          if (act === "resume") await docket.schedules.resume(name);
          if (act !== "run") return back(base, { notice: `schedule ${name} ${act === "pause" ? "paused" : "resumed"}` });
          const job = await docket.schedules.runNow(name);
          return back(base, { notice: `schedule ${name}: job ${job.id} enqueued` });
        } catch (error) {
          if (error instanceof DocketError) return back(base, { error: error.message });
          throw error;
        }
      }
      return respond(404, "not found");
    } catch (error) {
      if (error instanceof DocketError && error.name === "InvalidArgumentError") return back(base, { error: error.message });
      return respond(500, page({ title: "Error", base, body: emptyBody(`The dashboard could not read the queue: ${(error as Error).message}`) }));
    }
  };
}

function emptyBody(text: string): Html {
  return html`<p>${text}</p>`;
}

