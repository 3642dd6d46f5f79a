import { parseArgs } from "node:util";
import { Docket } from "../core/docket.ts";
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
        limit: { type: "string" },
        after: { type: "string" },
        window: { type: "string" },
        "older-than": { type: "string" },
        all: { type: "boolean", default: false },
        "dry-run": { type: "boolean", default: false },
        port: { type: "string" },
        "read-only": { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
    });
  } catch (error) {
    return usage((error as Error).message);
  }
  const { values: v, positionals } = parsed;
  if (v.help || positionals.length === 0) {
    console.log(USAGE);
    return v.help ? EXIT.ok : EXIT.usage;
  }
  const url = v.url ?? process.env.DOCKET_URL;
  if (url === undefined) return usage("--url is required (or set DOCKET_URL)");
  let docket: Docket | null = null;
  try {
    docket = new Docket({ adapter: await openUrl(url, v.prefix, { create: positionals[0] === "migrate" }) });
    if (positionals[0] === "dashboard") return await serveDashboard(docket, v.port, v["read-only"] ?? false);
    const out = await runCommand(docket, positionals, {
      json: v.json ?? false,
      ...(v.state === undefined ? {} : { state: v.state }),
      ...(v.queue === undefined ? {} : { queue: v.queue }),
      ...(v.task === undefined ? {} : { task: v.task }),
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

/** `docket dashboard`: serves the dashboard on 127.0.0.1 until SIGINT or SIGTERM. Mutations are allowed unless --read-only (it listens on loopback only). */
async function serveDashboard(docket: Docket, portText: string | undefined, readOnly: boolean): Promise<number> {
  const port = portText === undefined ? 8080 : Number(portText);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new UsageError(`--port must be a port number, got ${JSON.stringify(portText)}`);
  const { serveOnNode } = await import("../dashboard/node.ts");
  const { server, url } = await serveOnNode(docket.dashboard({ readOnly, authorize: () => true }), port);
  console.log(`docket dashboard on ${url}${readOnly ? " (read-only)" : ""}; Ctrl-C stops it`);
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
