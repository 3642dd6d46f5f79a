/**
 * The dashboard's request checks, on web-standard APIs only (Node and Deno):
 * the Host allow-list, the origin a same-site POST must come from, and the
 * HMAC-signed CSRF tokens and banner messages.
 */
import { InvalidArgumentError } from "../core/errors.ts";

/** How long a CSRF token from a rendered page stays valid. */
export const CSRF_MAX_AGE_MS = 24 * 3_600_000;

/**
 * `basePath` as given ("/ops", "/ops/" or "/") → the form with one trailing
 * "/" ("/ops/"). Throws InvalidArgumentError when it does not start with "/".
 */
export function normalizeBasePath(basePath: string | undefined): string {
  const base = basePath ?? "/";
  if (typeof base !== "string" || !base.startsWith("/") || base.startsWith("//") || /[?#\s]/.test(base)) {
    throw new InvalidArgumentError(`basePath must be a path starting with "/" (e.g. "/ops" or "/ops/"), got ${JSON.stringify(basePath)}`);
  }
  return base.endsWith("/") ? base : `${base}/`;
}

/**
 * A Host allow-list. An entry with a port ("ops.example.com:8443",
 * "[::1]:8080") matches that host and port; an entry without one matches
 * the name on any port. Names compare case-insensitively, a trailing dot
 * ignored.
 */
export class HostList {
  readonly #exact = new Set<string>();
  readonly #names = new Set<string>();
  constructor(entries: readonly string[]) {
    for (const entry of entries) {
      if (typeof entry !== "string" || entry.trim() === "" || /[/\s@?#]/.test(entry)) throw new InvalidArgumentError(`allowedHosts entries must be host names, got ${JSON.stringify(entry)}`);
      const split = splitHost(entry.trim());
      if (split.port === null) this.#names.add(split.name);
      else this.#exact.add(`${split.name}:${split.port}`);
    }
  }
  /** Whether a Host header value is on the list; a missing header is not. */
  allows(host: string | null): boolean {
    if (host === null || host === "") return false;
    const { name, port } = splitHost(host.trim());
    return this.#names.has(name) || (port !== null && this.#exact.has(`${name}:${port}`));
  }
}

function splitHost(host: string): { name: string; port: string | null } {
  const m = /^(\[[^\]]*\]|[^:]*)(?::(\d+))?$/.exec(host.toLowerCase());
  if (!m) return { name: host.toLowerCase(), port: null };
  return { name: m[1]!.replace(/\.$/, ""), port: m[2] ?? null };
}

export interface OriginOptions {
  publicOrigin?: string | undefined;
  trustProxy?: boolean | undefined;
}

/**
 * The origins a mutation's Origin header may carry: the request URL's own,
 * the configured `publicOrigin`, and with `trustProxy` the one named by
 * X-Forwarded-Proto and X-Forwarded-Host (first values). Throws
 * InvalidArgumentError for a `publicOrigin` that is not an http(s) origin.
 */
export function originChecker(options: OriginOptions): (request: Request, url: URL) => Set<string> {
  let configured: string | null = null;
  if (options.publicOrigin !== undefined) {
    let parsed: URL | null = null;
    try {
      parsed = new URL(options.publicOrigin);
    } catch {
      parsed = null;
    }
    if (!parsed || (parsed.protocol !== "https:" && parsed.protocol !== "http:") || (parsed.pathname !== "/" && parsed.pathname !== "") || parsed.search !== "" || parsed.username !== "") {
      throw new InvalidArgumentError(`publicOrigin must be an origin like "https://ops.example.com", got ${JSON.stringify(options.publicOrigin)}`);
    }
    configured = parsed.origin;
  }
  const trustProxy = options.trustProxy === true;
  return (request, url) => {
    const origins = new Set([url.origin]);
    if (configured !== null) origins.add(configured);
    if (trustProxy) {
      const first = (name: string) => request.headers.get(name)?.split(",")[0]?.trim() || null;
      const proto = first("x-forwarded-proto") ?? url.protocol.slice(0, -1);
      const host = first("x-forwarded-host") ?? request.headers.get("host") ?? url.host;
      if (/^https?$/i.test(proto)) {
        try {
          origins.add(new URL(`${proto.toLowerCase()}://${host}`).origin);
        } catch {
          // A malformed forwarded host adds nothing.
        }
      }
    }
    return origins;
  };
}

/**
 * HMAC-SHA-256 under one secret, for CSRF tokens and banner messages.
 * Handlers built with the same secret accept each other's tokens and
 * messages (several instances, restarts); a random secret is used when none
 * is configured, so those are then valid only for that handler.
 */
export class Signer {
  readonly #key: ReturnType<typeof globalThis.crypto.subtle.importKey>;
  constructor(secret: string | Uint8Array | undefined) {
    let bytes: Uint8Array;
    if (secret === undefined) bytes = globalThis.crypto.getRandomValues(new Uint8Array(32));
    else if (typeof secret === "string") bytes = new TextEncoder().encode(secret);
    else if (secret instanceof Uint8Array) bytes = secret;
    else throw new InvalidArgumentError("secret must be a string or a Uint8Array");
    if (bytes.length < 16) throw new InvalidArgumentError(`secret must be at least 16 bytes long (e.g. 32 random bytes), got ${bytes.length}`);
    this.#key = globalThis.crypto.subtle.importKey("raw", bytes.slice(), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  }

  /** The first 16 bytes of HMAC(secret, purpose NUL text), as hex. */
  async mac(purpose: string, text: string): Promise<string> {
    const sig = await globalThis.crypto.subtle.sign("HMAC", await this.#key, new TextEncoder().encode(`${purpose}\0${text}`));
    return hex(new Uint8Array(sig).subarray(0, 16));
  }

  /** A CSRF token: 48 hex digits, issued-at seconds (8), a nonce (8), the MAC (32). */
  async csrfToken(now = Date.now()): Promise<string> {
    const head = Math.floor(now / 1_000).toString(16).padStart(8, "0") + hex(globalThis.crypto.getRandomValues(new Uint8Array(4)));
    return head + (await this.mac("csrf", head));
  }

  /** Whether `token` was issued by a Signer with this secret within CSRF_MAX_AGE_MS (5 minutes of clock skew allowed). */
  async csrfValid(token: unknown, now = Date.now()): Promise<boolean> {
    if (typeof token !== "string" || !/^[0-9a-f]{48}$/.test(token)) return false;
    const issuedMs = parseInt(token.slice(0, 8), 16) * 1_000;
    if (issuedMs > now + 300_000 || now - issuedMs > CSRF_MAX_AGE_MS) return false;
    return sameText(await this.mac("csrf", token.slice(0, 16)), token.slice(16));
  }
}

/** Compares two strings in time that depends only on their lengths. */
export function sameText(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

function hex(bytes: Uint8Array): string {
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}
