/** Reads a mutation's form body with a size cap. */

/** The default cap on a request body: the dashboard's forms carry a few dozen bytes. */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024;

/**
 * The request's url-encoded form, or "too large" when Content-Length or the
 * bytes read exceed `maxBytes` (reading stops there and the stream is
 * cancelled). Another content type, or an unreadable body, is an empty form.
 */
export async function readForm(request: Request, maxBytes: number): Promise<URLSearchParams | "too large"> {
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > maxBytes) return "too large";
  if (request.body === null) return new URLSearchParams();
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        await reader.cancel().catch(() => undefined);
        return "too large";
      }
      chunks.push(value);
    }
  } catch {
    return new URLSearchParams();
  }
  const type = (request.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/x-www-form-urlencoded") return new URLSearchParams();
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.byteLength;
  }
  return new URLSearchParams(new TextDecoder().decode(bytes));
}
