import { execFile } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * A PostgreSQL server this process owns: its own data directory and port, so
 * a test may terminate its connections and restart it without disturbing the
 * shared server other tests use. Needs the server binaries (initdb, pg_ctl);
 * as root they run as the `postgres` user (initdb refuses root).
 */
export interface PrivatePostgres {
  /** Connection URL of the `postgres` database (user postgres, trust auth). */
  readonly url: string;
  readonly port: number;
  /** `pg_ctl restart -m fast`: every connection is dropped; resolves when it accepts connections again. */
  restart(): Promise<void>;
  /** Stops the server and deletes its directory. */
  destroy(): Promise<void>;
}

/** The newest installed PostgreSQL bin directory with initdb and pg_ctl, or null. */
export function postgresBinDir(): string | null {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return null;
  const versions = readdirSync(root).filter((v) => existsSync(join(root, v, "bin", "initdb")) && existsSync(join(root, v, "bin", "pg_ctl")));
  versions.sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? join(root, versions[0]!, "bin") : null;
}

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = 40_000 + Math.floor(Math.random() * 10_000);
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error("no free port found for a private server");
}

/**
 * A fresh temporary directory (`prefix`) for PostgreSQL servers, and `exec`,
 * which runs one of `bin`'s programs: as root both belong to the `postgres`
 * user (initdb and the server refuse root), otherwise to this process's.
 */
export async function postgresWorkspace(bin: string, prefix: string): Promise<{ dir: string; exec: (cmd: string, args: string[]) => Promise<{ stdout: string; stderr: string }> }> {
  const asRoot = process.getuid?.() === 0;
  const exec = (cmd: string, args: string[]) =>
    asRoot ? run("runuser", ["-u", "postgres", "--", join(bin, cmd), ...args]) : run(join(bin, cmd), args);
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (asRoot) {
    const { stdout: uid } = await run("id", ["-u", "postgres"]);
    const { stdout: gid } = await run("id", ["-g", "postgres"]);
    chownSync(dir, Number(uid.trim()), Number(gid.trim()));
  }
  return { dir, exec };
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const bin = postgresBinDir();
  if (!bin) throw new Error("PostgreSQL server binaries (initdb, pg_ctl) not found under /usr/lib/postgresql");
  const { dir, exec } = await postgresWorkspace(bin, "docket-private-pg-");
  const data = join(dir, "data");
  const port = await freePort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`;
  const ctl = (...args: string[]) => exec("pg_ctl", ["-D", data, "-l", join(dir, "log"), "-o", options, "-w", "-t", "60", ...args]);
  await exec("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]);
  await ctl("start");
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    restart: async () => void (await ctl("restart", "-m", "fast")),
    destroy: async () => {
      await exec("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
