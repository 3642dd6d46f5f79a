import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CompiledQuery, type Dialect, type KyselyPlugin } from "kysely";
import type { DocketAdapter } from "../../src/core/adapter.ts";
import { KyselyStore } from "../../src/adapters/kysely/store.ts";
import { StatementScheduler, settleByPolling, settleOnFinish, settleWithin } from "../../src/testing/schedule/statement-scheduler.ts";
import { scheduledDialect } from "../../src/testing/kysely/scheduled-dialect.ts";
import type { ScheduleEnv, ScheduledWorker } from "../../src/testing/schedule/concurrent.ts";
import type { Mutation, MutationTarget } from "../../src/testing/kysely/mutations.ts";
import { MYSQL_URL, PG_URL, REQUIRE_ALL, dropPgDatabase, type TargetName } from "./targets.ts";

/**
 * Fixed connection sets for the property tests: per adapter, `workers`
 * adapters each on ONE connection of its own, wrapped by the scheduled
 * dialect (and, for the mutation runner, one mutation), plus an ungated
 * adapter and admin connection for setup, resets and lock-wait detection.
 * The connections live across runs (fast); each env has its own table prefix
 * inside one per-process database.
 */
export interface PropertyEnv extends ScheduleEnv {
  readonly name: TargetName;
  readonly capabilities: MutationTarget;
  close(): Promise<void>;
}

export const WORKERS = 4;
/** After a reset: each store forgets what it remembered of the tables just emptied (KyselyStore.forgetRemembered). */
function forgetRemembered(adapters: readonly unknown[]): void {
  for (const a of adapters) (a as { forgetRemembered?: () => void }).forgetRemembered?.();
}

/** What a reset empties: jobs, and the stored controls and keys (they would otherwise leak from one run into the next). */
const RESET_TABLES = ["jobs", "concurrency_keys", "rate_keys", "fair_keys", "queues", "tasks"];
const runId = `${process.pid.toString(36)}${Date.now().toString(36)}`;
let envs = 0;

function instrumentFor(statements: StatementScheduler, label: string, mutation: Mutation | undefined, identify?: Parameters<typeof scheduledDialect>[1]["identify"]) {
  const plugins: KyselyPlugin[] = mutation?.plugins?.() ?? [];
  return {
    plugins,
    ...(mutation?.wrapEngine ? { wrapEngine: mutation.wrapEngine } : {}),
    wrapDialect: (d: Dialect) =>
      scheduledDialect(mutation?.wrapDialect ? mutation.wrapDialect(d) : d, { scheduler: statements, connection: label, ...(identify ? { identify } : {}) }),
  };
}

/** The engine capabilities the mutations select on; only a kysely store has them (the mutations rewrite its statements). */
function capabilitiesOf(a: DocketAdapter): MutationTarget {
  if (!(a instanceof KyselyStore)) throw new Error(`${a.name}: not a kysely store, so no mutation applies to it`);
  return { skipLocked: a.capabilities.skipLocked, returning: a.capabilities.returning };
}

export async function openSqliteEnv(mutation?: Mutation): Promise<PropertyEnv> {
  const { sqliteAdapter } = await import("../../src/adapters/sqlite/index.ts");
  const { default: Database } = await import("better-sqlite3");
  const dir = mkdtempSync(join(tmpdir(), "docket-prop-"));
  const filename = join(dir, "jobs.db");
  const tablePrefix = `p${envs++}_`;
  const plain = sqliteAdapter({ filename, tablePrefix });
  await plain.migrate();
  const admin = new Database(filename);
  const statements = new StatementScheduler(settleOnFinish);
  const dbs: InstanceType<typeof Database>[] = [];
  const workers: ScheduledWorker[] = [];
  for (let i = 1; i <= WORKERS; i++) {
    const db = new Database(filename);
    dbs.push(db);
    const label = `w${i}`;
    // busy_timeout 0: in-process writers wait in the adapter's write queue (a promise), never on SQLite's lock.
    workers.push({ label, adapter: sqliteAdapter({ database: db as never, tablePrefix, busyTimeoutMs: 0, instrument: instrumentFor(statements, label, mutation) }) });
  }
  return {
    name: "sqlite",
    capabilities: capabilitiesOf(plain),
    statements,
    workers,
    plain,
    reset: async () => {
      admin.exec(RESET_TABLES.map((t) => `DELETE FROM ${tablePrefix}${t};`).join("\n"));
      forgetRemembered([plain, ...workers.map((w) => w.adapter)]);
    },
    cancelBlocked: async () => undefined,
    async close() {
      for (const w of workers) await w.adapter.close();
      await plain.close();
      for (const db of dbs) db.close();
      admin.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function openPostgresEnv(mutation?: Mutation): Promise<PropertyEnv> {
  const { postgresAdapter } = await import("../../src/adapters/postgres/index.ts");
  const pg = (await import("pg")).default;
  const database = `docket_prop_${runId}`;
  const root = new pg.Client({ connectionString: PG_URL });
  await root.connect();
  const exists = await root.query("select 1 from pg_database where datname = $1", [database]);
  if (exists.rowCount === 0) await root.query(`CREATE DATABASE ${database}`);
  await root.end();
  const u = new URL(PG_URL);
  u.pathname = `/${database}`;
  const url = u.toString();
  const tablePrefix = `p${envs++}_`;
  const plain = postgresAdapter({ connectionString: url, tablePrefix, max: 2 });
  await plain.migrate();
  const admin = new pg.Pool({ connectionString: url, max: 3 });
  const isWaiting = async (pid: unknown) => {
    const r = await admin.query("select wait_event_type from pg_stat_activity where pid = $1", [pid]);
    return r.rows[0]?.wait_event_type === "Lock";
  };
  const statements = new StatementScheduler(settleByPolling(isWaiting, 2));
  const pools: InstanceType<typeof pg.Pool>[] = [];
  const workers: ScheduledWorker[] = [];
  const identify = async (c: { executeQuery: (q: CompiledQuery) => Promise<{ rows: unknown[] }> }) =>
    ((await c.executeQuery(CompiledQuery.raw("select pg_backend_pid() as pid"))).rows[0] as { pid: number }).pid;
  for (let i = 1; i <= WORKERS; i++) {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    pools.push(pool);
    const label = `w${i}`;
    workers.push({ label, adapter: postgresAdapter({ pool: pool as never, tablePrefix, instrument: instrumentFor(statements, label, mutation, identify) }) });
  }
  return {
    name: "postgres",
    capabilities: capabilitiesOf(plain),
    statements,
    workers,
    plain,
    reset: async () => {
      for (const t of RESET_TABLES) await admin.query(`DELETE FROM ${tablePrefix}${t}`);
      forgetRemembered([plain, ...workers.map((w) => w.adapter)]);
    },
    cancelBlocked: async () => {
      for (const w of workers) {
        const pid = statements.connectionId(w.label);
        if (pid !== undefined) await admin.query("select pg_cancel_backend($1)", [pid]);
      }
    },
    async close() {
      for (const w of workers) await w.adapter.close();
      for (const p of pools) await p.end();
      await plain.close();
      await admin.end();
    },
  };
}

export async function openMysqlEnv(mutation?: Mutation): Promise<PropertyEnv> {
  const { mysqlAdapter } = await import("../../src/adapters/mysql/index.ts");
  const mysql = (await import("mysql2")).default;
  const mysqlp = (await import("mysql2/promise")).default;
  const database = `docket_prop_${runId}`;
  const root = await mysqlp.createConnection({ uri: MYSQL_URL });
  await root.query(`CREATE DATABASE IF NOT EXISTS ${database}`);
  await root.end();
  const u = new URL(MYSQL_URL);
  u.pathname = `/${database}`;
  const url = u.toString();
  const tablePrefix = `p${envs++}_`;
  const plain = mysqlAdapter({ uri: url, tablePrefix, connectionLimit: 2 });
  await plain.migrate();
  const admin = mysqlp.createPool({ uri: url, connectionLimit: 2 });
  // InnoDB's lock views are stale when polled fast: "not finished within a few ms" counts as blocked.
  const statements = new StatementScheduler(settleWithin(Number(process.env.DOCKET_MYSQL_SETTLE_MS ?? 8)));
  const pools: ReturnType<typeof mysql.createPool>[] = [];
  const workers: ScheduledWorker[] = [];
  const identify = async (c: { executeQuery: (q: CompiledQuery) => Promise<{ rows: unknown[] }> }) =>
    ((await c.executeQuery(CompiledQuery.raw("select connection_id() as id"))).rows[0] as { id: number }).id;
  for (let i = 1; i <= WORKERS; i++) {
    const pool = mysql.createPool({ uri: url, connectionLimit: 1 });
    pools.push(pool);
    const label = `w${i}`;
    workers.push({ label, adapter: mysqlAdapter({ pool: pool as never, tablePrefix, instrument: instrumentFor(statements, label, mutation, identify) }) });
  }
  return {
    name: "mysql",
    capabilities: capabilitiesOf(plain),
    statements,
    workers,
    plain,
    reset: async () => {
      for (const t of RESET_TABLES) await admin.query(`DELETE FROM ${tablePrefix}${t}`);
      forgetRemembered([plain, ...workers.map((w) => w.adapter)]);
    },
    cancelBlocked: async () => {
      for (const w of workers) {
        const id = statements.connectionId(w.label);
        if (id !== undefined) await admin.query(`KILL QUERY ${Number(id)}`);
      }
    },
    async close() {
      for (const w of workers) await w.adapter.close();
      for (const p of pools) await new Promise<void>((r) => p.end(() => r()));
      await plain.close();
      await admin.end();
    },
  };
}

const OPENERS: Record<TargetName, (m?: Mutation) => Promise<PropertyEnv>> = {
  sqlite: openSqliteEnv,
  postgres: openPostgresEnv,
  mysql: openMysqlEnv,
};

/** The env, or null (with a loud banner) when the server is down and not required. */
export async function openPropertyEnv(name: TargetName, mutation?: Mutation): Promise<PropertyEnv | null> {
  try {
    return await OPENERS[name](mutation);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    if (REQUIRE_ALL) throw new Error(`DOCKET_REQUIRE_ALL_ADAPTERS=1 but the ${name} property env is unavailable: ${reason}`, { cause: error });
    console.warn(`\n${"!".repeat(78)}\n!! SKIPPING the ${name} property tests: ${reason}\n${"!".repeat(78)}\n`);
    return null;
  }
}

/** Drops the per-process property databases (call once, at the end). */
export async function dropPropertyDatabases(names: readonly TargetName[]): Promise<void> {
  const database = `docket_prop_${runId}`;
  if (names.includes("postgres")) {
    await dropPgDatabase(PG_URL, database).catch(() => undefined);
  }
  if (names.includes("mysql")) {
    const mysqlp = (await import("mysql2/promise")).default;
    const c = await mysqlp.createConnection({ uri: MYSQL_URL });
    await c.query(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined);
    await c.end();
  }
}

/** Runs from the environment: DOCKET_PROPERTY_RUNS, or 20× with DOCKET_PROPERTY_DEEP=1. */
export function propertyRuns(defaultRuns: number): number {
  const explicit = process.env.DOCKET_PROPERTY_RUNS;
  if (explicit) return Number(explicit);
  return process.env.DOCKET_PROPERTY_DEEP === "1" ? defaultRuns * 20 : defaultRuns;
}
