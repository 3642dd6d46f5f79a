import { parseArgs } from "node:util";
import { Docket } from "../client/docket.ts";
import { AdapterError, ClosedError, DocketError, SchemaMissingError, SchemaTooNewError } from "../core/errors.ts";
import { Refused, runCommand } from "./commands.ts";
import { openUrl } from "./open.ts";
import { redactSecrets } from "./redact.ts";
import { jsonText, printable } from "./terminal-text.ts";
import { EXIT, USAGE, UsageError } from "./usage.ts";

/**
 * The `docket` command. Prints the result on stdout (a table, or JSON with
 * --json), errors on stderr, and exits with a code from EXIT.
 */
export async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        url: { type: "string" },
        prefix: { type: "string" },
        json: { type: "boolean", default: false },
        state: { type: "string" },
        queue: { type: "string" },
        task: { type: "string" },
        key: { type: "string" },
        error: { type: "string" },
        expect: { type: "string" },
        limit: { type: "string" },
        after: { type: "string" },
        window: { type: "string" },
        "older-than": { type: "string" },
        all: { type: "boolean", default: false },
        "dry-run": { type: "boolean", default: false },
        port: { type: "string" },
        host: { type: "string" },
        "read-only": { type: "boolean", default: false },
        "allow-host": { type: "string", multiple: true },
        "no-auth": { type: "boolean", default: false },
        "public-origin": { type: "string" },
        "trust-proxy": { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
        version: { type: "boolean", short: "v", default: false },
      },
    });
  } catch (error) {
    return usage((error as Error).message);
  }
  const { values: v, positionals } = parsed;
  if (v.version) {
    console.log(await packageVersion());
    return EXIT.ok;
  }
  const help = v.help || (positionals.length === 1 && positionals[0] === "help");
  if (help || positionals.length === 0) {
    console.log(USAGE);
    return help ? EXIT.ok : EXIT.usage;
  }
  const url = v.url ?? process.env.DOCKET_URL;
  if (url === undefined) return usage("--url is required (or set DOCKET_URL)");
  let docket: Docket | null = null;
  try {
    docket = new Docket({ adapter: await openUrl(url, v.prefix, { create: positionals[0] === "migrate" }) });
    if (positionals[0] === "dashboard") {
      return await serveDashboard(docket, {
        portText: v.port,
        host: v.host,
        readOnly: v["read-only"] ?? false,
        allowHosts: v["allow-host"] ?? [],
        noAuth: v["no-auth"] ?? false,
        publicOrigin: v["public-origin"],
        trustProxy: v["trust-proxy"] ?? false,
      });
    }
    const out = await runCommand(docket, positionals, {
      json: v.json ?? false,
      ...(v.state === undefined ? {} : { state: v.state }),
      ...(v.queue === undefined ? {} : { queue: v.queue }),
      ...(v.task === undefined ? {} : { task: v.task }),
      ...(v.key === undefined ? {} : { key: v.key }),
      ...(v.error === undefined ? {} : { error: v.error }),
      ...(v.expect === undefined ? {} : { expect: v.expect }),
      ...(v.limit === undefined ? {} : { limit: v.limit }),
      ...(v.after === undefined ? {} : { after: v.after }),
      ...(v.window === undefined ? {} : { window: v.window }),
      ...(v["older-than"] === undefined ? {} : { olderThan: v["older-than"] }),
      all: v.all ?? false,
      dryRun: v["dry-run"] ?? false,
    });
    console.log(v.json ? jsonText(out.json) : printable(out.text));
    return EXIT.ok;
  } catch (error) {
    if (error instanceof UsageError) return usage(redactSecrets(error.message, url));
    const database = error instanceof AdapterError || error instanceof ClosedError || !(error instanceof DocketError || error instanceof Refused);
    const hint = error instanceof SchemaMissingError ? " (run: docket migrate)" : error instanceof SchemaTooNewError ? " (upgrade docket)" : "";
    console.error(printable(redactSecrets(`docket: ${(error as Error).message}${hint}`, url)));
    return database && !(error instanceof SchemaMissingError) && !(error instanceof SchemaTooNewError) ? EXIT.database : EXIT.refused;
  } finally {
    await docket?.close().catch(() => undefined);
  }
}

interface DashboardFlags {
  portText: string | undefined;
  host: string | undefined;
  readOnly: boolean;
  allowHosts: string[];
  noAuth: boolean;
  publicOrigin: string | undefined;
  trustProxy: boolean;
}

/**
 * `docket dashboard`: serves the dashboard on 127.0.0.1 (or `--host`) until SIGINT or
 * SIGTERM; `--no-auth` only on a loopback address. Mutations are allowed unless --read-only. Every request needs the
 * password (HTTP basic auth, any user, or a Bearer token): DOCKET_DASHBOARD_TOKEN,
 * or one generated and printed once; --no-auth turns this off. Only a Host
 * naming the bound address or an --allow-host name is served.
 * DOCKET_DASHBOARD_SECRET signs the forms (default: random per start).
 */
async function serveDashboard(docket: Docket, flags: DashboardFlags): Promise<number> {
  const port = flags.portText === undefined ? 8080 : Number(flags.portText);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new UsageError(`--port must be a port number, got ${JSON.stringify(flags.portText)}`);
  const host = flags.host ?? "127.0.0.1";
  const loopback = /^(127(\.\d{1,3}){3}|::1|localhost)$/i.test(host);
  if (flags.noAuth && !loopback) throw new UsageError(`--no-auth serves the queue to anyone who can reach ${host}: it is allowed only on a loopback address (127.0.0.1, ::1, localhost)`);
  const { serveOnNode } = await import("../dashboard/node.ts");
  const { randomBytes } = await import("node:crypto");
  const fromEnv = process.env.DOCKET_DASHBOARD_TOKEN || undefined;
  const password = flags.noAuth ? undefined : (fromEnv ?? randomBytes(18).toString("base64url"));
  if (password !== undefined && password.length < 8) throw new UsageError("DOCKET_DASHBOARD_TOKEN must be at least 8 characters long");
  const handler = docket.dashboard({
    readOnly: flags.readOnly,
    authorize: () => true,
    trustProxy: flags.trustProxy,
    ...(flags.publicOrigin === undefined ? {} : { publicOrigin: flags.publicOrigin }),
    ...(process.env.DOCKET_DASHBOARD_SECRET ? { secret: process.env.DOCKET_DASHBOARD_SECRET } : {}),
  });
  const { server, url } = await serveOnNode(handler, port, { host, allowedHosts: flags.allowHosts, ...(password === undefined ? {} : { password }) }).catch((error: NodeJS.ErrnoException) => {
    const why = error.code === "EADDRINUSE" ? "the port is in use (another dashboard, or another server)" : error.code === "EADDRNOTAVAIL" ? "the address is not one of this machine's" : error.message;
    throw new Refused(`cannot serve the dashboard on ${host.includes(":") ? `[${host}]` : host}:${port}: ${why}`);
  });
  console.log(`docket dashboard on ${url}${flags.readOnly ? " (read-only)" : ""} (pid ${process.pid}); Ctrl-C stops it`);
  if (!loopback && flags.allowHosts.length === 0) console.log(`it answers only requests whose Host names ${host}: add --allow-host <name> for each name browsers use to reach it`);
  if (password === undefined) console.log("authentication is off (--no-auth): anyone who can reach this address controls the queue");
  else if (fromEnv === undefined) console.log(`log in with any user name and the password ${password} (generated for this run; set DOCKET_DASHBOARD_TOKEN to choose it)`);
  else console.log("log in with any user name and the password in DOCKET_DASHBOARD_TOKEN");
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return EXIT.ok;
}

function usage(message: string): number {
  console.error(`docket: ${printable(message)}\nRun docket --help for usage.`);
  return EXIT.usage;
}

/** This package's version, from its package.json (two levels up from src/cli and from dist/cli alike). */
async function packageVersion(): Promise<string> {
  const { readFile } = await import("node:fs/promises");
  return (JSON.parse(await readFile(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
}
