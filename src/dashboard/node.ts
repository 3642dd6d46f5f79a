import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { DashboardHandler } from "./index.ts";

/**
 * Serves a web-standard handler on `node:http` at 127.0.0.1:`port` (0: any
 * free port). Resolves with the server and its URL once it listens.
 */
export async function serveOnNode(handler: DashboardHandler, port: number, host = "127.0.0.1"): Promise<{ server: Server; url: string }> {
  const server = createServer(nodeListener(handler, host));
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const address = server.address();
  const actual = typeof address === "object" && address ? address.port : port;
  return { server, url: `http://${host}:${actual}/` };
}

/**
 * A `(req, res)` listener for `node:http` or Express (`app.use(path,
 * listener)` with the dashboard's `basePath` set to `path` + "/"; Express's
 * `originalUrl` is used when present). A form body a body parser already
 * read (Express's `urlencoded()` leaves `req.body` and an ended stream) is
 * passed on as the form it was.
 */
export function nodeListener(handler: DashboardHandler, host = "localhost"): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => void bridge(handler, req, res, host);
}

async function bridge(handler: DashboardHandler, req: IncomingMessage, res: ServerResponse, host: string): Promise<void> {
  try {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    const parsed = (req as { body?: unknown }).body;
    if (hasBody && chunks.length === 0 && typeof parsed === "object" && parsed !== null && !Buffer.isBuffer(parsed)) {
      chunks.push(Buffer.from(new URLSearchParams(parsed as Record<string, string>).toString()));
      headers.set("content-type", "application/x-www-form-urlencoded");
    }
    const path = (req as { originalUrl?: string }).originalUrl ?? req.url ?? "/";
    const request = new Request(new URL(path, `http://${req.headers.host ?? host}`), {
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
