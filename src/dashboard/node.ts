/**
 * `docket/dashboard/node`: serves the dashboard's web-standard handler
 * (`docket.dashboard(options)`) on `node:http` or Express.
 * @module docket/dashboard/node
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { InvalidArgumentError } from "../core/errors.ts";
import { DEFAULT_MAX_BODY_BYTES } from "./form.ts";
import type { DashboardHandler } from "./index.ts";
import { HostList } from "./security.ts";

export interface NodeListenerOptions {
  /**
   * Host header values accepted ("name" on any port, or "name:port"); any
   * other Host is refused with 421 before the request is read. Default:
   * any Host (serveOnNode adds the address it is bound to).
   */
  allowedHosts?: readonly string[];
  /**
   * When set, every request must carry this secret, as the password of HTTP
   * basic auth (any user name) or as `Authorization: Bearer <secret>`;
   * others get 401 before the body is read. Compared in constant time.
   */
  password?: string;
  /** A body over this many bytes gets 413: by Content-Length without reading it, or once the bytes read pass it. Default 65536. */
  maxBodyBytes?: number;
}

export interface ServeOptions extends NodeListenerOptions {
  /** The address to bind. Default "127.0.0.1". */
  host?: string;
}

/**
 * Serves a web-standard handler on `node:http` at 127.0.0.1:`port` (0: any
 * free port). Resolves with the server and its URL once it listens; rejects
 * with the listen's error (e.g. `EADDRINUSE`) when it cannot. Only a
 * Host header naming the bound address (as 127.0.0.1, localhost or [::1]
 * with the port, or the bound host) or one of `allowedHosts` is served.
 */
export async function serveOnNode(handler: DashboardHandler, port: number, hostOrOptions: string | ServeOptions = {}): Promise<{ server: Server; url: string }> {
  const options = typeof hostOrOptions === "string" ? { host: hostOrOptions } : hostOrOptions;
  const host = options.host ?? "127.0.0.1";
  checkOptions(options);
  const server = createServer();
  // A failed listen (the port taken, the address not this machine's) rejects, and leaves nothing open.
  await new Promise<void>((resolve, reject) => {
    const failed = (error: Error) => reject(error);
    server.once("error", failed);
    server.listen(port, host, () => {
      server.off("error", failed);
      resolve();
    });
  });
  const address = server.address();
  const actual = typeof address === "object" && address ? address.port : port;
  const named = host.includes(":") ? `[${host}]` : host;
  // Attached before any connection is read: no I/O runs between the listen callback and here.
  const bound = [`127.0.0.1:${actual}`, `localhost:${actual}`, `[::1]:${actual}`, `${named}:${actual}`];
  server.on("request", nodeListener(handler, { ...options, allowedHosts: [...bound, ...(options.allowedHosts ?? [])] }));
  return { server, url: `http://${named}:${actual}/` };
}

/**
 * A `(req, res)` listener for `node:http` or Express (`app.use(path,
 * listener)` with the dashboard's `basePath` set to `path`; Express's
 * `originalUrl` is used when present). A form body a body parser already
 * read (Express's `urlencoded()` leaves `req.body` and an ended stream) is
 * passed on as the form it was. The second argument may be the host name
 * used when a request has no Host header (default "localhost").
 */
export function nodeListener(handler: DashboardHandler, hostOrOptions: string | NodeListenerOptions = {}): (req: IncomingMessage, res: ServerResponse) => void {
  const options = typeof hostOrOptions === "string" ? {} : hostOrOptions;
  const fallbackHost = typeof hostOrOptions === "string" ? hostOrOptions : "localhost";
  const maxBody = checkOptions(options);
  const hosts = options.allowedHosts === undefined ? null : new HostList(options.allowedHosts);
  const password = options.password === undefined ? null : digest(options.password);
  return (req, res) => {
    if (hosts !== null && !hosts.allows(req.headers.host ?? null)) return refuse(req, res, 421, "unknown host");
    if (password !== null && !authenticated(req.headers.authorization, password)) {
      return refuse(req, res, 401, "authentication required", { "www-authenticate": 'Basic realm="docket dashboard", charset="UTF-8"' });
    }
    void bridge(handler, req, res, fallbackHost, maxBody);
  };
}

/** Throws InvalidArgumentError for a bad option; returns the body cap. */
function checkOptions(options: NodeListenerOptions): number {
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if (!Number.isSafeInteger(maxBody) || maxBody < 1) throw new InvalidArgumentError(`maxBodyBytes must be a positive integer, got ${JSON.stringify(options.maxBodyBytes)}`);
  if (options.password !== undefined && (typeof options.password !== "string" || options.password.length < 8)) throw new InvalidArgumentError("password must be a string of at least 8 characters");
  if (options.allowedHosts !== undefined) new HostList(options.allowedHosts);
  return maxBody;
}

function digest(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

/** Basic (any user, the password) or Bearer; compared as SHA-256 digests with timingSafeEqual. */
function authenticated(header: string | undefined, password: Buffer): boolean {
  const m = /^(basic|bearer)\s+(\S+)\s*$/i.exec(header ?? "");
  if (!m) return false;
  let secret = m[2]!;
  if (m[1]!.toLowerCase() === "basic") {
    const decoded = Buffer.from(secret, "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon < 0) return false;
    secret = decoded.slice(colon + 1);
  }
  return timingSafeEqual(digest(secret), password);
}

/**
 * Answers without reading the body, then stops reading: the request stays
 * paused (the client's upload stalls on TCP flow control) and its socket is
 * destroyed a little later, so the client reads the answer before the
 * connection is reset.
 */
function refuse(req: IncomingMessage, res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  const unread = req.method !== "GET" && req.method !== "HEAD" && !req.complete;
  req.pause();
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8", ...headers });
  res.end(text, () => {
    if (unread) setTimeout(() => req.destroy(), 2_000).unref();
  });
}

/** The body's chunks, or null (reading stopped, the stream paused) once they pass `maxBody` bytes. */
function readBody(req: IncomingMessage, maxBody: number): Promise<Buffer[] | null> {
  const chunks: Buffer[] = [];
  if (req.readableEnded) return Promise.resolve(chunks);
  return new Promise((resolve, reject) => {
    let size = 0;
    const stop = () => {
      req.off("data", onData).off("end", onEnd).off("error", onError);
      req.pause();
    };
    const onData = (c: Buffer) => {
      size += c.length;
      if (size <= maxBody) return void chunks.push(c);
      stop();
      resolve(null);
    };
    const onEnd = () => (stop(), resolve(chunks));
    const onError = (e: Error) => (stop(), reject(e));
    req.on("data", onData).on("end", onEnd).on("error", onError);
  });
}

async function bridge(handler: DashboardHandler, req: IncomingMessage, res: ServerResponse, fallbackHost: string, maxBody: number): Promise<void> {
  try {
    const path = (req as { originalUrl?: string }).originalUrl ?? req.url ?? "/";
    // Concatenated, not resolved: "//evil/x" stays a path on this host.
    if (!path.startsWith("/")) return refuse(req, res, 400, "bad request target");
    const declared = Number(req.headers["content-length"] ?? "0");
    if (declared > maxBody) return refuse(req, res, 413, "request body too large");
    const chunks = await readBody(req, maxBody);
    if (chunks === null) return refuse(req, res, 413, "request body too large");
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    const parsed = (req as { body?: unknown }).body;
    if (hasBody && chunks.length === 0 && typeof parsed === "object" && parsed !== null && !Buffer.isBuffer(parsed)) {
      chunks.push(Buffer.from(new URLSearchParams(parsed as Record<string, string>).toString()));
      headers.set("content-type", "application/x-www-form-urlencoded");
    }
    const host = req.headers.host ?? fallbackHost;
    let url: URL | null = null;
    try {
      if (/^[^/\\?#@\s]+$/.test(host)) url = new URL(`http://${host}${path}`);
    } catch {
      url = null;
    }
    if (url === null) return refuse(req, res, 400, "bad Host header or request target");
    const request = new Request(url, {
      method: req.method ?? "GET",
      headers,
      ...(hasBody ? { body: Buffer.concat(chunks) } : {}),
    });
    const response = await handler(request);
    res.writeHead(response.status, Object.fromEntries(response.headers.entries()));
    res.end(Buffer.from(await response.arrayBuffer()));
  } catch (error) {
    res.writeHead(500, { "content-type": "text/plain" });
    res.end(`dashboard error: ${(error as Error).message}`);
  }
}
