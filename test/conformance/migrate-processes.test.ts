import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MYSQL_URL, PG_URL, REQUIRE_ALL } from "../support/targets.ts";

const CHILD = join(import.meta.dirname, "../support/migrate-child.ts");

function migrateInChild(kind: string, location: string, prefix: string): Promise<{ applied: number[]; version: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, kind, location, prefix], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out.trim().split("\n").pop()!)) : reject(new Error(`child exited ${code}: ${err}`))));
  });
}

async function serverUp(kind: "postgres" | "mysql"): Promise<boolean> {
  try {
    if (kind === "postgres") {
      const pg = (await import("pg")).default;
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      await c.end();
    } else {
      const mysql = (await import("mysql2/promise")).default;
      await (await mysql.createConnection({ uri: MYSQL_URL })).end();
    }
    return true;
  } catch (error) {
    if (REQUIRE_ALL) throw error;
    console.warn(`!! SKIPPING the two-process migration test on ${kind}: server unavailable`);
    return false;
  }
}

/** Two OS processes migrate the same empty store at the same moment: each version is applied exactly once. */
describe("migrate from two processes at once", () => {
  const prefix = `mp${process.pid}_`;

  it("sqlite: applies each version exactly once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "docket-mp-"));
    try {
      const file = join(dir, "jobs.db");
      const results = await Promise.all([migrateInChild("sqlite", file, prefix), migrateInChild("sqlite", file, prefix)]);
      expect(results.flatMap((r) => r.applied).sort((a, b) => a - b)).toEqual([...Array(results[0]!.version).keys()].map((i) => i + 1));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("postgres: applies each version exactly once", async () => {
    if (!(await serverUp("postgres"))) return;
    const results = await Promise.all([migrateInChild("postgres", PG_URL, prefix), migrateInChild("postgres", PG_URL, prefix)]);
    const pg = (await import("pg")).default;
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    await c.query(`DROP TABLE IF EXISTS ${prefix}jobs, ${prefix}migrations`);
    await c.end();
    expect(results.flatMap((r) => r.applied).sort((a, b) => a - b)).toEqual([...Array(results[0]!.version).keys()].map((i) => i + 1));
  }, 60_000);

  it("mysql: applies each version exactly once", async () => {
    if (!(await serverUp("mysql"))) return;
    const mysql = (await import("mysql2/promise")).default;
    const db = `docket_mp_${process.pid}`;
    const c = await mysql.createConnection({ uri: MYSQL_URL });
    await c.query(`CREATE DATABASE IF NOT EXISTS ${db}`);
    const u = new URL(MYSQL_URL);
    u.pathname = `/${db}`;
    try {
      const results = await Promise.all([migrateInChild("mysql", u.toString(), prefix), migrateInChild("mysql", u.toString(), prefix)]);
      expect(results.flatMap((r) => r.applied).sort((a, b) => a - b)).toEqual([...Array(results[0]!.version).keys()].map((i) => i + 1));
    } finally {
      await c.query(`DROP DATABASE IF EXISTS ${db}`);
      await c.end();
    }
  }, 60_000);
});
