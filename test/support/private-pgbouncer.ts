import { execFile, spawn, type ChildProcess } from "node:child_process";
import { accessSync, chownSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { promisify } from "node:util";
import { freePort } from "./private-postgres.ts";
import { PG_URL, REQUIRE_ALL } from "./targets.ts";

const run = promisify(execFile);

/**
 * A PgBouncer this process owns, in transaction pooling mode, on its own
 * port and directory, in front of the PostgreSQL server of PG_URL (trust
 * auth, any database). Server connections are few (`poolSize`), so the
 * statements of different clients land on shared server connections.
 */
export interface PrivatePgbouncer {
  /** `url` with its host and port replaced by PgBouncer's. */
  urlFor(url: string): string;
  readonly port: number;
  /** Stops PgBouncer and deletes its directory. */
  destroy(): Promise<void>;
}

/** The pgbouncer binary on PATH or in /usr/sbin, or null. */
export function pgbouncerBinary(): string | null {
  const dirs = [...(process.env.PATH ?? "").split(delimiter).filter(Boolean), "/usr/sbin"];
  for (const dir of dirs) {
    try {
      accessSync(join(dir, "pgbouncer"), constants.X_OK);
      return join(dir, "pgbouncer");
    } catch {
      // not here
    }
  }
  return null;
}

/**
 * Starts a PgBouncer, or returns null with a loud warning when the binary is
 * missing (a failure instead under DOCKET_REQUIRE_ALL_ADAPTERS=1). As root it
 * runs as the `postgres` user (PgBouncer refuses root).
 */
export async function startPrivatePgbouncer(what: string, poolSize = 4): Promise<PrivatePgbouncer | null> {
  const binary = pgbouncerBinary();
  if (!binary) {
    const reason = "the pgbouncer binary is not installed (apt-get install pgbouncer)";
    if (REQUIRE_ALL) throw new Error(`DOCKET_REQUIRE_ALL_ADAPTERS=1 but ${reason}`);
    console.warn(`\n${"!".repeat(78)}\n!! SKIPPING ${what}: ${reason}\n${"!".repeat(78)}\n`);
    return null;
  }
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), "docket-private-pgbouncer-"));
  const upstream = new URL(PG_URL);
  const port = await freePort();
  const ini = join(dir, "pgbouncer.ini");
  writeFileSync(join(dir, "userlist.txt"), `"${decodeURIComponent(upstream.username || "postgres")}" ""\n`);
  writeFileSync(
    ini,
    [
      "[databases]",
      `* = host=${upstream.hostname} port=${upstream.port || "5432"}`,
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      `unix_socket_dir = ${dir}`,
      "auth_type = trust",
      `auth_file = ${join(dir, "userlist.txt")}`,
      "pool_mode = transaction",
      "ignore_startup_parameters = extra_float_digits,options",
      `default_pool_size = ${poolSize}`,
      "max_client_conn = 500",
      `logfile = ${join(dir, "pgbouncer.log")}`,
      "",
    ].join("\n"),
  );
  if (asRoot) {
    const { stdout: uid } = await run("id", ["-u", "postgres"]);
    const { stdout: gid } = await run("id", ["-g", "postgres"]);
    for (const path of [dir, ini, join(dir, "userlist.txt")]) chownSync(path, Number(uid.trim()), Number(gid.trim()));
  }
  const server: ChildProcess = asRoot ? spawn("runuser", ["-u", "postgres", "--", binary, ini], { stdio: "ignore" }) : spawn(binary, [ini], { stdio: "ignore" });
  const exited = new Promise<void>((resolve) => server.once("exit", () => resolve()));
  const log = () => {
    try {
      return readFileSync(join(dir, "pgbouncer.log"), "utf8");
    } catch {
      return "";
    }
  };
  const destroy = async () => {
    // runuser forwards SIGTERM to pgbouncer, which closes every connection and exits.
    if (server.exitCode === null) server.kill("SIGTERM");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
    rmSync(dir, { recursive: true, force: true });
  };
  const urlFor = (url: string) => {
    const u = new URL(url);
    u.hostname = "127.0.0.1";
    u.port = String(port);
    return u.toString();
  };
  const pg = (await import("pg")).default;
  for (let i = 0; i < 100; i++) {
    if (server.exitCode !== null) break;
    const c = new pg.Client({ connectionString: urlFor(PG_URL) });
    c.on("error", () => undefined);
    try {
      await c.connect();
      await c.query("select 1");
      await c.end();
      return { urlFor, port, destroy };
    } catch {
      await c.end().catch(() => undefined);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const output = log();
  await destroy();
  throw new Error(`the private PgBouncer on port ${port} did not start:\n${output}`);
}
