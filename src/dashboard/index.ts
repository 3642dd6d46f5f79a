import type { Docket, TaskMap } from "../core/docket.ts";
import { DocketError, NotFoundError } from "../core/errors.ts";
import { html, page, type Html } from "./html.ts";
import { deadLetters, jobDetail, overview, type View } from "./pages.ts";

/** What a request may do: view pages, or one of the mutations. */
export type DashboardAction = "view" | "pause" | "resume" | "replay" | "replay-all" | "cancel";

export interface DashboardOptions {
  /** The path the dashboard is mounted at, ending in "/". Default "/". */
  basePath?: string;
  /**
   * Decides each request. Default: viewing is allowed, every mutation is
   * refused (pass an `authorize` that checks your session to allow them).
   */
  authorize?: (request: Request, action: DashboardAction) => boolean | Promise<boolean>;
  /** No mutation buttons, and every POST refused. Default false. */
  readOnly?: boolean;
}

export type DashboardHandler = (request: Request) => Promise<Response>;

/**
 * The dashboard as a web-standard handler, `(Request) => Promise<Response>`,
 * for `node:http` (through a small adapter), `Deno.serve`, Hono or Express.
 * Pages are rendered on the server (no script, no build step); mutations
 * are POST forms carrying a per-handler CSRF token, refused when the
 * token is missing or wrong, when the request's Origin is another site,
 * when read-only, or unless `authorize` allows them. Every value shown is
 * HTML-escaped.
 */
export function dashboard<T extends TaskMap>(docket: Docket<T>, options: DashboardOptions = {}): DashboardHandler {
  const base = options.basePath ?? "/";
  if (!base.startsWith("/") || !base.endsWith("/")) throw new TypeError(`basePath must start and end with "/", got ${JSON.stringify(base)}`);
  const authorize = options.authorize ?? ((_r: Request, a: DashboardAction) => a === "view");
  const readOnly = options.readOnly ?? false;
  const csrf = randomToken();

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
  const render = (title: string, body: Html, url: URL, status = 200) =>
    respond(status, page({ title, base, body, notice: url.searchParams.get("notice"), error: url.searchParams.get("error") }));
  const back = (to: string, message: { notice?: string; error?: string }) => {
    const q = new URLSearchParams(message as Record<string, string>).toString();
    return new Response(null, { status: 303, headers: { location: q === "" ? to : `${to}${to.includes("?") ? "&" : "?"}${q}` } });
  };

  return async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    if (!url.pathname.startsWith(base) && url.pathname !== base.slice(0, -1)) return respond(404, "not found");
    const path = url.pathname === base.slice(0, -1) ? "" : url.pathname.slice(base.length);
    try {
      if (request.method === "GET" || request.method === "HEAD") {
        if (!(await authorize(request, "view"))) return respond(403, "forbidden");
        const view: View = { base, csrf, canAct: !readOnly };
        if (path === "") {
          const [stats, schedules] = await Promise.all([docket.stats(), docket.schedules.list()]);
          return render("Queues", overview(stats, schedules, view), url);
        }
        if (path === "dead") return render("Dead letters", deadLetters(await docket.deadLetters.list({ limit: 200 }), view), url);
        const job = /^jobs\/(\d+)$/.exec(path);
        if (job) {
          const found = await docket.get(Number(job[1]));
          return found ? render(`Job #${found.id}`, jobDetail(found, view), url) : respond(404, page({ title: "Not found", base, body: emptyBody(`No job ${job[1]}.`) }));
        }
        if (path === "lookup") {
          const q = (url.searchParams.get("q") ?? "").trim();
          const byId = /^\d+$/.test(q) ? await docket.get(Number(q)) : null;
          const found = byId ?? (q === "" ? null : await docket.getByIdempotencyKey(q).catch(() => null));
          return found ? back(`${base}jobs/${found.id}`, {}) : back(base, { error: `no job with id or idempotency key ${JSON.stringify(q)}` });
        }
        return respond(404, page({ title: "Not found", base, body: emptyBody("No such page.") }));
      }
      if (request.method !== "POST") return respond(405, "method not allowed", { allow: "GET, HEAD, POST" });
      const origin = request.headers.get("origin");
      if (origin !== null && origin !== url.origin) return respond(403, "cross-site request refused");
      const form = await request.formData().catch(() => null);
      if (form?.get("csrf") !== csrf) return respond(403, "missing or wrong CSRF token");
      if (readOnly) return respond(403, "the dashboard is read-only");
      const queue = /^queues\/([^/]+)\/(pause|resume)$/.exec(path);
      if (queue) {
        const name = decodeURIComponent(queue[1]!);
        const act = queue[2] as "pause" | "resume";
        if (!(await authorize(request, act))) return respond(403, "forbidden");
        if (act === "pause") await docket.pauseQueue(name);
        else await docket.resumeQueue(name);
        return back(base, { notice: `queue ${name} ${act === "pause" ? "paused" : "resumed"}` });
      }
      const replay = /^dead\/(\d+)\/replay$/.exec(path);
      if (replay) {
        if (!(await authorize(request, "replay"))) return respond(403, "forbidden");
        try {
          const j = await docket.deadLetters.replay(Number(replay[1]));
          return back(`${base}dead`, { notice: `job ${j.id} replayed` });
        } catch (error) {
          if (error instanceof NotFoundError) return back(`${base}dead`, { notice: `job ${replay[1]} is not dead (already replayed?)` });
          throw error;
        }
      }
      if (path === "dead/replay-all") {
        if (!(await authorize(request, "replay-all"))) return respond(403, "forbidden");
        const { replayed } = await docket.deadLetters.replayAll();
        return back(`${base}dead`, { notice: `${replayed} dead job(s) replayed` });
      }
      const cancel = /^jobs\/(\d+)\/cancel$/.exec(path);
      if (cancel) {
        if (!(await authorize(request, "cancel"))) return respond(403, "forbidden");
        try {
          await docket.cancel(Number(cancel[1]));
          return back(`${base}jobs/${cancel[1]}`, { notice: "cancelled" });
        } catch (error) {
          if (error instanceof DocketError) return back(`${base}jobs/${cancel[1]}`, { error: error.message });
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

function randomToken(): string {
  const bytes = new Uint8Array(24);
  globalThis.crypto.getRandomValues(bytes);
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}
