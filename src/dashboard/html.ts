/** HTML building blocks for the dashboard. Every value interpolated into a page goes through `esc`. */
import { visible } from "../core/unsafe-text.ts";

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Text for an HTML body or a quoted attribute: `<script>` in a payload renders as text. */
export function esc(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** A fragment already built from escaped parts. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

/**
 * Tagged template: interpolations are escaped unless they are Html (or
 * arrays of Html). In text, the characters that could deceive a reader
 * (controls, bidi overrides: core/unsafe-text.ts) are shown as escapes
 * (`\u202e`), newlines kept; in an attribute's value (after `="`) they are
 * kept as they are, so a form posts back the exact name it was given.
 */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  values.forEach((v, i) => {
    out += render(v, /=\s*["']$/.test(strings[i]!)) + strings[i + 1]!;
  });
  return new Html(out);
}

function render(v: unknown, inAttribute: boolean): string {
  if (v instanceof Html) return v.text;
  if (Array.isArray(v)) return v.map((x) => render(x, inAttribute)).join("");
  if (v === null || v === undefined || v === false) return "";
  return inAttribute ? esc(v) : esc(visible(String(v)));
}

export function time(ms: number | null): string {
  return ms === null ? "–" : new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function duration(ms: number): string {
  const a = Math.abs(ms);
  const text = a < 1_000 ? `${a} ms` : a < 60_000 ? `${Math.round(a / 1_000)} s` : a < 3_600_000 ? `${Math.round(a / 60_000)} min` : `${(a / 3_600_000).toFixed(1)} h`;
  return ms < 0 ? `${text} ago` : text;
}

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:20px;align-items:center}
header a{color:#cfe0ff;text-decoration:none}header strong{font-size:16px}#refresh{margin-left:auto}#refresh a{text-decoration:underline}
main{padding:16px 20px}h2{font-size:15px;margin:22px 0 8px}
table{border-collapse:collapse;background:#fff;min-width:50%}th,td{border:1px solid #dde1e8;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
form.inline{display:inline}#actions form{margin-right:8px}button{font:inherit;padding:2px 10px;cursor:pointer}
.notice{background:#e7f6e7;border:1px solid #9c9;padding:6px 10px;margin-bottom:10px}
.error{background:#fbeaea;border-color:#d99}pre{background:#fff;border:1px solid #dde1e8;padding:8px;white-space:pre-wrap;word-break:break-all;margin:0}
.muted{color:#545b6b}.bad{color:#b00020}svg{background:#fff;border:1px solid #dde1e8}
.graph{display:flex;align-items:center;gap:10px;background:#fff;border:1px solid #dde1e8;padding:10px;width:fit-content}
.graph .col{display:flex;flex-direction:column;gap:6px}.graph .arrow{font-size:20px;color:#6b7385}
.node{display:block;border:1px solid #b8c0cc;border-radius:6px;padding:4px 10px;text-decoration:none;color:#1d2330;background:#f6f7f9}
.node.self{border-width:2px;border-color:#1d2330}.node small{color:#6b7385}
.s-succeeded{background:#e7f6e7}.s-dead,.s-cancelled{background:#fbeaea}.s-running{background:#e7effb}.s-waiting{background:#fff7e0}
`;

export interface Layout {
  title: string;
  base: string;
  notice?: string | null;
  error?: string | null;
  /** The text shown in the lookup field. */
  query?: string;
  body: Html;
  /** Live refresh: the page reloads itself every this many seconds (a meta refresh, no script), with the switch in the header; absent, no switch. */
  refresh?: { seconds: number; href: (seconds: number) => string };
}

/** The live refresh periods the switch offers (0: off, the default). */
export const REFRESH_CHOICES = [0, 5, 15, 60] as const;

export function page(l: Layout): string {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${l.title} · docket</title><style>${new Html(STYLE)}</style>${l.refresh && l.refresh.seconds > 0 ? html`<meta http-equiv="refresh" content="${l.refresh.seconds}">` : ""}</head>
<body><header><strong>docket</strong><a href="${l.base}">Overview</a><a href="${l.base}jobs">Jobs</a><a href="${l.base}workers">Workers</a><a href="${l.base}controls">Controls</a><a href="${l.base}dead">Dead letters</a>
<form class="inline" method="get" action="${l.base}lookup"><input name="q" value="${l.query ?? ""}" placeholder="job id or idempotency key" size="28" aria-label="lookup"> <button>Find</button></form>${l.refresh ? refreshSwitch(l.refresh) : ""}</header>
<main>${l.notice ? html`<div class="notice" role="status">${l.notice}</div>` : ""}${l.error ? html`<div class="notice error" role="alert">${l.error}</div>` : ""}
<h1 style="font-size:18px">${l.title}</h1>${l.body}</main></body></html>`.text;
}

/** A POST form with the CSRF token: one button. */
export function action(base: string, path: string, csrf: string, label: string, name: string): Html {
  return html`<form class="inline" method="post" action="${base}${path}"><input type="hidden" name="csrf" value="${csrf}"><button name="${name}" data-action="${name}">${label}</button></form>`;
}

/** The header's live refresh switch: the current period as text, the others as links. */
function refreshSwitch(r: NonNullable<Layout["refresh"]>): Html {
  const choice = (n: number) => (n === 0 ? "off" : `${n} s`);
  return html`<span id="refresh">refresh: ${REFRESH_CHOICES.map((n) => (n === r.seconds ? html`<strong>${choice(n)}</strong> ` : html`<a href="${r.href(n)}">${choice(n)}</a> `))}</span>`;
}
