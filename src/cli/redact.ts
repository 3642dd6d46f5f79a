/** Query parameters whose value is a credential in a database URL. */
const SECRET_PARAMS = /([?&](?:password|passwd|pass|pwd|sslpassword)=)([^&#]*)/gi;

/**
 * Where the userinfo of `url` lies, or null when it has none: from after
 * `scheme://` (or `scheme:`, or the start) to the LAST `@`, so that a
 * password with an unencoded `/`, `@` or `#` lies inside it (a path with
 * an `@` makes it reach too far: more is hidden, never less).
 */
function userinfo(url: string): { start: number; end: number } | null {
  const end = url.lastIndexOf("@");
  if (end < 0) return null;
  const scheme = /^[a-z][a-z0-9+.-]*:(\/\/)?/i.exec(url);
  const start = scheme ? scheme[0].length : 0;
  return start <= end ? { start, end } : null;
}

/** `url` with its userinfo (user and password) and any password parameter replaced by `***`. */
export function redactUrl(url: string): string {
  const at = userinfo(url);
  const hidden = at === null ? url : `${url.slice(0, at.start)}***${url.slice(at.end)}`;
  return hidden.replace(SECRET_PARAMS, "$1***");
}

/** The credentials `url` carries (its password, raw and percent-decoded), none empty. */
function secretsOf(url: string): string[] {
  const found: string[] = [];
  const at = userinfo(url);
  if (at !== null) {
    const info = url.slice(at.start, at.end);
    const colon = info.indexOf(":");
    if (colon >= 0) found.push(info.slice(colon + 1));
  }
  for (const m of url.matchAll(SECRET_PARAMS)) found.push(m[2]!);
  const decoded = found.map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  });
  return [...new Set([...found, ...decoded])].filter((s) => s.length > 0).sort((a, b) => b.length - a.length);
}

/**
 * `text` (an error message, say) with `url` written as redactUrl writes it
 * and every other occurrence of its password replaced by `***`: whatever a
 * driver put in its message, the credentials of `url` are not in the result.
 */
export function redactSecrets(text: string, url: string | undefined): string {
  if (url === undefined || url === "") return text;
  let out = text.split(url).join(redactUrl(url));
  for (const secret of secretsOf(url)) out = out.split(secret).join("***");
  return out;
}
