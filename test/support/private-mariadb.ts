import { execFile, spawn, type ChildProcess } from "node:child_process";
import { chownSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort } from "./private-postgres.ts";

const run = promisify(execFile);

/**
 * A MariaDB server this process owns: its own data directory, socket and
 * port, so a test may restart it without disturbing the shared server. Needs
 * `mariadb-install-db` and `mariadbd`; as root the server runs as `mysql`.
 * Grant tables are skipped: any user connects without a password.
 */
export interface PrivateMariadb {
  /** Connection URL of the `mysql` database (user root). */
  readonly url: string;
  readonly port: number;
  /** Stops the server (every connection drops) and starts it again; resolves when it accepts connections. */
  restart(): Promise<void>;
  /** Stops the server and deletes its directory. */
  destroy(): Promise<void>;
}

export async function startPrivateMariadb(): Promise<PrivateMariadb> {
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), "docket-private-mariadb-"));
  if (asRoot) {
    const { stdout: uid } = await run("id", ["-u", "mysql"]);
    const { stdout: gid } = await run("id", ["-g", "mysql"]);
    chownSync(dir, Number(uid.trim()), Number(gid.trim()));
  }
  const data = join(dir, "data");
  await run("mariadb-install-db", ["--no-defaults", `--datadir=${data}`, ...(asRoot ? ["--user=mysql"] : []), "--auth-root-authentication-method=normal", "--skip-test-db"]);
  const port = await freePort();
  const args = ["--no-defaults", `--datadir=${data}`, `--port=${port}`, "--bind-address=127.0.0.1", `--socket=${join(dir, "sock")}`, "--skip-grant-tables", "--innodb-flush-log-at-trx-commit=2", "--max-connections=200"];
  let server: ChildProcess | null = null;
  const start = async () => {
    server = asRoot ? spawn("runuser", ["-u", "mysql", "--", "/usr/sbin/mariadbd", ...args], { stdio: "ignore" }) : spawn("/usr/sbin/mariadbd", args, { stdio: "ignore" });
    const mysql = (await import("mysql2/promise")).default;
    for (let i = 0; i < 300; i++) {
      try {
        const c = await mysql.createConnection({ host: "127.0.0.1", port, user: "root" });
        await c.end();
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    throw new Error(`the private MariaDB on port ${port} did not start`);
  };
  const stop = async () => {
    const s = server as ChildProcess | null;
    if (!s || s.exitCode !== null) return;
    const exited = new Promise<void>((r) => s.once("exit", () => r()));
    // runuser forwards SIGTERM to mariadbd, which shuts down cleanly.
    s.kill("SIGTERM");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 30_000))]);
  };
  await start();
  return {
    url: `mysql://root@127.0.0.1:${port}/mysql`,
    port,
    restart: async () => {
      await stop();
      await start();
    },
    destroy: async () => {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
