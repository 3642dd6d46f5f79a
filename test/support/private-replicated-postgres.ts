import { appendFileSync, existsSync, readFileSync, rmSync } from "node:fs";
import { createServer, connect, type Socket } from "node:net";
import { join } from "node:path";
import { freePort, postgresBinDir, postgresWorkspace } from "./private-postgres.ts";
import { REQUIRE_ALL } from "./targets.ts";

/**
 * A TCP forwarder in this process, standing in for a virtual IP or a cloud
 * endpoint: each new connection goes to the current target port on 127.0.0.1.
 */
export interface TcpProxy {
  readonly port: number;
  /** New connections go to `port` from now on; every connection open now is reset, as when the address moves. */
  moveTo(port: number): void;
  /** Stops listening and resets every connection. */
  close(): Promise<void>;
}

export async function startTcpProxy(target: number): Promise<TcpProxy> {
  const open = new Set<[Socket, Socket]>();
  const server = createServer((client) => {
    const upstream = connect(target, "127.0.0.1");
    const pair: [Socket, Socket] = [client, upstream];
    open.add(pair);
    const end = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const s of pair) s.on("error", end).on("close", end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const resetAll = () => {
    for (const pair of open) for (const s of pair) if (!s.destroyed) s.resetAndDestroy();
    open.clear();
  };
  const port = await freePort();
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(port, "127.0.0.1", resolve));
  return {
    port,
    moveTo(next) {
      target = next;
      resetAll();
    },
    close: () => {
      resetAll();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A primary PostgreSQL server and a synchronous streaming standby of it
 * (application_name standby1), each on its own port and data directory,
 * and a TcpProxy in front that points at the primary. Trust auth, user
 * postgres. A commit on the primary returns only once the standby has it.
 */
export interface ReplicatedPostgres {
  readonly primaryPort: number;
  readonly standbyPort: number;
  readonly proxy: TcpProxy;
  /** Connection URL of `database` on 127.0.0.1:`port` (a server's or the proxy's). */
  url(port: number, database?: string): string;
  /** `pg_ctl stop -m immediate` on the primary: its processes die at once, as in a crash. */
  crashPrimary(): Promise<void>;
  /** `pg_ctl promote -w` on the standby: resolves once it accepts writes (it then waits for no standby). */
  promoteStandby(): Promise<void>;
  /** Stops both servers and the proxy, and deletes their directories. */
  destroy(): Promise<void>;
}

/**
 * Starts the pair, or returns null with a loud warning when the server
 * binaries (initdb, pg_ctl, pg_basebackup) are missing (a failure instead
 * under DOCKET_REQUIRE_ALL_ADAPTERS=1). As root they run as the `postgres` user.
 */
export async function startReplicatedPostgres(what: string): Promise<ReplicatedPostgres | null> {
  const bin = postgresBinDir();
  if (!bin || !existsSync(join(bin, "pg_basebackup"))) {
    const reason = "the PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup) are not installed under /usr/lib/postgresql";
    if (REQUIRE_ALL) throw new Error(`DOCKET_REQUIRE_ALL_ADAPTERS=1 but ${reason}`);
    console.warn(`\n${"!".repeat(78)}\n!! SKIPPING ${what}: ${reason}\n${"!".repeat(78)}\n`);
    return null;
  }
  const { dir, exec } = await postgresWorkspace(bin, "docket-replicated-pg-");
  const primary = join(dir, "primary");
  const standby = join(dir, "standby");
  const ctl = (data: string, ...args: string[]) => exec("pg_ctl", ["-D", data, "-l", `${data}.log`, "-w", "-t", "60", ...args]);
  const url = (port: number, database = "postgres") => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const [primaryPort, standbyPort] = [await freePort(), await freePort()];
  const proxy = await startTcpProxy(primaryPort);
  const destroy = async () => {
    await proxy.close();
    for (const data of [primary, standby]) if (existsSync(data)) await ctl(data, "-m", "immediate", "stop").catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await exec("initdb", ["-D", primary, "-A", "trust", "-U", "postgres", "--no-sync"]);
    // The files belong to the postgres user; as root, appending keeps their owner.
    appendFileSync(
      join(primary, "postgresql.conf"),
      [
        "listen_addresses = '127.0.0.1'",
        `port = ${primaryPort}`,
        `unix_socket_directories = '${dir}'`,
        "wal_level = replica",
        "max_wal_senders = 5",
        "synchronous_standby_names = 'standby1'",
        "synchronous_commit = on",
        "",
      ].join("\n"),
    );
    await ctl(primary, "start");
    await exec("pg_basebackup", ["-d", `host=127.0.0.1 port=${primaryPort} user=postgres application_name=standby1`, "-D", standby, "-R", "-X", "stream", "-c", "fast"]);
    if (!readFileSync(join(standby, "postgresql.auto.conf"), "utf8").includes("application_name=standby1")) {
      throw new Error("pg_basebackup -R wrote a primary_conninfo without application_name=standby1");
    }
    // The copied configuration, with the standby's own port, and no synchronous standby of its own once promoted.
    appendFileSync(join(standby, "postgresql.conf"), `port = ${standbyPort}\nsynchronous_standby_names = ''\n`);
    await ctl(standby, "start");
    const pg = (await import("pg")).default;
    const c = new pg.Client({ connectionString: url(primaryPort) });
    await c.connect();
    try {
      const end = Date.now() + 30_000;
      const syncState = async () => (await c.query("select sync_state from pg_stat_replication where application_name = 'standby1'")).rows[0]?.sync_state;
      while ((await syncState()) !== "sync") {
        if (Date.now() > end) throw new Error("the standby did not become synchronous within 30 s");
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await c.end();
    }
  } catch (error) {
    const logs = [primary, standby].map((d) => (existsSync(`${d}.log`) ? `${d}.log:\n${readFileSync(`${d}.log`, "utf8")}` : "")).join("\n");
    await destroy();
    throw new Error(`the replicated PostgreSQL pair did not start: ${(error as Error).message}\n${logs}`, { cause: error });
  }
  return {
    primaryPort,
    standbyPort,
    proxy,
    url,
    crashPrimary: async () => void (await ctl(primary, "-m", "immediate", "stop")),
    promoteStandby: async () => void (await ctl(standby, "promote")),
    destroy,
  };
}
