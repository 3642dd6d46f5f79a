import { execFile, spawn, type ChildProcess } from "node:child_process";
import { accessSync, chownSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { promisify } from "node:util";
import { freePort } from "./private-postgres.ts";
import { REQUIRE_ALL } from "./targets.ts";

const run = promisify(execFile);

const MARIADBD = "/usr/sbin/mariadbd";
const GALERA = "/usr/lib/galera/libgalera_smm.so";
const NODES = [1, 2, 3] as const;
/** A node of the cluster: 1 (the one bootstrapped), 2 or 3. */
export type GaleraNode = (typeof NODES)[number];

/**
 * A 3-node MariaDB Galera Cluster on loopback that this process owns: each
 * node with its own data directory, SQL, group (gmcast), IST and SST ports,
 * rsync state transfers, and root without a password over TCP. Galera's
 * defaults otherwise (`wsrep_sync_wait=0`: a read on one node may not yet
 * see what another node committed). Certification conflicts are logged.
 */
export interface PrivateGalera {
  /** `mysql://root@127.0.0.1:<node's SQL port>/<database>` (default database `mysql`). */
  url(node: GaleraNode, database?: string): string;
  /** SIGKILLs the node's server; resolves once the process is gone. */
  kill(node: GaleraNode): Promise<void>;
  /** Starts a stopped or killed node again; resolves once it rejoined (IST or SST) and is Synced with 3 members. */
  restart(node: GaleraNode): Promise<void>;
  /** The node's error log (wsrep's messages included), for diagnostics. */
  log(node: GaleraNode): string;
  /** Stops every node and deletes their directories. */
  destroy(): Promise<void>;
}

interface NodeSetup {
  readonly node: GaleraNode;
  readonly dir: string;
  readonly cnf: string;
  readonly sqlPort: number;
  server: ChildProcess | null;
}

function onPath(name: string, extra: string[] = []): string | null {
  for (const dir of [...(process.env.PATH ?? "").split(delimiter).filter(Boolean), ...extra]) {
    try {
      accessSync(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch {
      // not here
    }
  }
  return null;
}

/** What is missing to run a Galera cluster here (empty: nothing). */
export function galeraMissing(): string[] {
  const missing: string[] = [];
  try {
    accessSync(MARIADBD, constants.X_OK);
  } catch {
    missing.push(MARIADBD);
  }
  try {
    accessSync(GALERA, constants.R_OK);
  } catch {
    missing.push(`${GALERA} (apt-get install galera-4)`);
  }
  for (const tool of ["mariadb-install-db", "rsync", "wsrep_sst_rsync"]) if (!onPath(tool, ["/usr/bin", "/usr/sbin"])) missing.push(tool);
  return missing;
}

/** `count` distinct ports that are free now. */
async function distinctFreePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

/** A mysql2 connection's answer to `SHOW STATUS LIKE 'wsrep%'`, as name → value; null when the node does not answer. */
async function wsrepStatus(port: number): Promise<Map<string, string> | null> {
  const mysql = (await import("mysql2/promise")).default;
  let c: import("mysql2/promise").Connection | null = null;
  try {
    c = await mysql.createConnection({ host: "127.0.0.1", port, user: "root", connectTimeout: 2_000 });
    const [rows] = await c.query("SHOW STATUS LIKE 'wsrep%'");
    return new Map((rows as { Variable_name: string; Value: string }[]).map((r) => [r.Variable_name, r.Value]));
  } catch {
    return null;
  } finally {
    await c?.end().catch(() => undefined);
  }
}

/**
 * Starts the cluster, or returns null with a loud warning when a binary is
 * missing (a failure instead under DOCKET_REQUIRE_ALL_ADAPTERS=1). As root
 * the servers run as `mysql` (`--user=mysql`; their directories are owned by it).
 */
export async function startPrivateGalera(what: string): Promise<PrivateGalera | null> {
  const missing = galeraMissing();
  if (missing.length > 0) {
    const reason = `a Galera cluster needs ${missing.join(", ")}`;
    if (REQUIRE_ALL) throw new Error(`DOCKET_REQUIRE_ALL_ADAPTERS=1 but ${reason}`);
    console.warn(`\n${"!".repeat(78)}\n!! SKIPPING ${what}: ${reason}\n${"!".repeat(78)}\n`);
    return null;
  }
  const asRoot = process.getuid?.() === 0;
  const owner = asRoot ? await mysqlOwner() : null;
  const own = (path: string) => owner && chownSync(path, owner.uid, owner.gid);
  const base = mkdtempSync(join(tmpdir(), "docket-private-galera-"));
  own(base);
  const ports = await distinctFreePorts(NODES.length * 4);
  const groupPort = (n: GaleraNode) => ports[(n - 1) * 4 + 1]!;
  const clusterAddress = `gcomm://${NODES.map((n) => `127.0.0.1:${groupPort(n)}`).join(",")}`;
  const nodes = NODES.map((node): NodeSetup => {
    const dir = join(base, `node${node}`);
    const data = join(dir, "data");
    mkdirSync(data, { recursive: true });
    own(dir);
    own(data);
    const [sqlPort, gmcast, ist, sst] = ports.slice((node - 1) * 4, node * 4) as [number, number, number, number];
    const cnf = join(dir, "my.cnf");
    writeFileSync(cnf, config({ node, dir, data, sqlPort, gmcast, ist, sst, clusterAddress, user: asRoot ? "mysql" : null }));
    own(cnf);
    return { node, dir, cnf, sqlPort, server: null };
  });
  const at = (n: GaleraNode) => nodes[n - 1]!;
  const log = (n: GaleraNode) => {
    try {
      return readFileSync(join(at(n).dir, "error.log"), "utf8");
    } catch {
      return "";
    }
  };
  const stop = async (n: GaleraNode, signal: NodeJS.Signals) => {
    const s = at(n).server;
    if (!s || s.exitCode !== null || s.signalCode !== null) return;
    const exited = new Promise<void>((r) => s.once("exit", () => r()));
    s.kill(signal);
    await Promise.race([exited, new Promise((r) => setTimeout(r, 30_000))]);
  };
  const start = async (n: GaleraNode, extra: string[]) => {
    const setup = at(n);
    // mariadbd itself is the child (it drops to `mysql` on its own), so kill() reaches the server, not a wrapper.
    setup.server = spawn(MARIADBD, [`--defaults-file=${setup.cnf}`, ...extra], { stdio: "ignore" });
    await waitSynced(setup, log);
  };
  // A process that exits without destroy() (a test timeout ends its worker) leaves no server behind.
  const onExit = () => {
    for (const { server } of nodes) if (server && server.exitCode === null && server.signalCode === null) server.kill("SIGKILL");
    rmSync(base, { recursive: true, force: true });
  };
  process.once("exit", onExit);
  const destroy = async () => {
    await Promise.all(NODES.map((n) => stop(n, "SIGTERM")));
    await Promise.all(NODES.map((n) => stop(n, "SIGKILL")));
    process.off("exit", onExit);
    rmSync(base, { recursive: true, force: true });
  };
  try {
    await run("mariadb-install-db", [
      "--no-defaults",
      `--datadir=${join(at(1).dir, "data")}`,
      ...(asRoot ? ["--user=mysql"] : []),
      "--auth-root-authentication-method=normal",
      "--skip-test-db",
      ...ENGINE_OPTIONS.map((o) => `--${o}`),
    ]);
    // Node 1 founds the cluster once and stops cleanly, so its data carries the cluster's id and position; nodes 2
    // and 3 start from copies of it and join by IST of the few writesets since (a full rsync SST each takes longer).
    await start(1, ["--wsrep-new-cluster"]);
    await stop(1, "SIGTERM");
    rmSync(join(at(1).dir, "data", "gvwstate.dat"), { force: true });
    for (const n of [2, 3] as const) await run("cp", ["-a", join(at(1).dir, "data"), at(n).dir]);
    await start(1, ["--wsrep-new-cluster"]);
    for (const n of [2, 3] as const) await start(n, []);
    await waitClusterSize(nodes, 3, log);
  } catch (error) {
    await destroy();
    throw error;
  }
  return {
    url: (n, database = "mysql") => `mysql://root@127.0.0.1:${at(n).sqlPort}/${database}`,
    kill: (n) => stop(n, "SIGKILL"),
    async restart(n) {
      await stop(n, "SIGTERM");
      const others = nodes.filter((s) => s.node !== n);
      // Joining while the others still count the node's last incarnation stalls the join for many seconds.
      await waitClusterSize(others, others.length, log);
      // After a crash the node's position is known only to InnoDB: recovered first, it rejoins by IST, not SST.
      await start(n, [`--wsrep_start_position=${await recoverPosition(at(n))}`]);
      await waitClusterSize(nodes, 3, log);
    },
    log,
    destroy,
  };
}

/** Storage options shared by mariadb-install-db and the servers: small, unsynced, fast to create (a test cluster). */
const ENGINE_OPTIONS = [
  "innodb_buffer_pool_size=32M",
  "innodb_log_file_size=16M",
  "innodb_log_buffer_size=4M",
  "innodb_flush_log_at_trx_commit=2",
  "innodb_doublewrite=0",
  "performance_schema=OFF",
  "skip-name-resolve",
];

function config(o: {
  node: GaleraNode;
  dir: string;
  data: string;
  sqlPort: number;
  gmcast: number;
  ist: number;
  sst: number;
  clusterAddress: string;
  user: string | null;
}): string {
  const provider = [
    `gmcast.listen_addr=tcp://127.0.0.1:${o.gmcast}`,
    `ist.recv_addr=127.0.0.1:${o.ist}`,
    "gcache.size=64M",
    // Each certification conflict is logged with the keys that collided (see `log()`).
    "cert.log_conflicts=yes",
    // A SIGKILLed node is evicted after a few seconds rather than the default 5–15 s.
    "evs.suspect_timeout=PT3S",
    "evs.inactive_timeout=PT6S",
    "evs.install_timeout=PT6S",
  ].join(";");
  return [
    "[mysqld]",
    ...(o.user ? [`user=${o.user}`] : []),
    `datadir=${o.data}`,
    `port=${o.sqlPort}`,
    "bind-address=127.0.0.1",
    `socket=${join(o.dir, "sock")}`,
    `pid-file=${join(o.dir, "mariadbd.pid")}`,
    `log-error=${join(o.dir, "error.log")}`,
    "max_connections=300",
    ...ENGINE_OPTIONS,
    "binlog_format=ROW",
    "default_storage_engine=InnoDB",
    "innodb_autoinc_lock_mode=2",
    "wsrep_on=ON",
    `wsrep_provider=${GALERA}`,
    "wsrep_cluster_name=docket_test",
    `wsrep_cluster_address=${o.clusterAddress}`,
    `wsrep_node_name=node${o.node}`,
    `wsrep_node_address=127.0.0.1:${o.gmcast}`,
    `wsrep_node_incoming_address=127.0.0.1:${o.sqlPort}`,
    `wsrep_provider_options="${provider}"`,
    "wsrep_log_conflicts=ON",
    "wsrep_sst_method=rsync",
    `wsrep_sst_receive_address=127.0.0.1:${o.sst}`,
    "",
  ].join("\n");
}

async function mysqlOwner(): Promise<{ uid: number; gid: number }> {
  const { stdout: uid } = await run("id", ["-u", "mysql"]);
  const { stdout: gid } = await run("id", ["-g", "mysql"]);
  return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
}

/** The node's last committed position (`uuid:seqno`), read from InnoDB by `mariadbd --wsrep-recover` (what galera_recovery does). */
async function recoverPosition(setup: NodeSetup): Promise<string> {
  const out = join(setup.dir, "recover.log");
  rmSync(out, { force: true });
  await run(MARIADBD, [`--defaults-file=${setup.cnf}`, "--wsrep-recover", `--log-error=${out}`]);
  const found = /WSREP: Recovered position: (\S+:-?\d+)/.exec(readFileSync(out, "utf8"));
  if (!found) throw new Error(`mariadbd --wsrep-recover found no position for Galera node ${setup.node}:\n${tail(readFileSync(out, "utf8"))}`);
  return found[1]!;
}

/** Resolves once the node answers and reports Synced; throws (with the log's tail) if it exits or takes over 120 s. */
async function waitSynced(setup: NodeSetup, log: (n: GaleraNode) => string): Promise<void> {
  const end = Date.now() + 120_000;
  for (;;) {
    const server = setup.server!;
    if (server.exitCode !== null || server.signalCode !== null) {
      throw new Error(`Galera node ${setup.node} exited (${server.exitCode ?? server.signalCode}) while starting:\n${tail(log(setup.node))}`);
    }
    const status = await wsrepStatus(setup.sqlPort);
    if (status?.get("wsrep_local_state_comment") === "Synced" && status.get("wsrep_ready") === "ON") return;
    if (Date.now() > end) throw new Error(`Galera node ${setup.node} not Synced within 120 s (${status?.get("wsrep_local_state_comment") ?? "no answer"}):\n${tail(log(setup.node))}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Resolves once every node reports `size` members and Synced. */
async function waitClusterSize(nodes: readonly NodeSetup[], size: number, log: (n: GaleraNode) => string): Promise<void> {
  const end = Date.now() + 60_000;
  for (;;) {
    const states = await Promise.all(nodes.map((n) => wsrepStatus(n.sqlPort)));
    if (states.every((s) => s?.get("wsrep_cluster_size") === String(size) && s.get("wsrep_local_state_comment") === "Synced")) return;
    if (Date.now() > end) {
      const seen = states.map((s, i) => `node ${i + 1}: size ${s?.get("wsrep_cluster_size") ?? "?"}, ${s?.get("wsrep_local_state_comment") ?? "no answer"}`);
      throw new Error(`the Galera cluster did not reach ${size} Synced members within 60 s (${seen.join("; ")}):\n${nodes.map((n) => tail(log(n.node))).join("\n")}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

function tail(text: string, lines = 40): string {
  return text.split("\n").slice(-lines).join("\n");
}
