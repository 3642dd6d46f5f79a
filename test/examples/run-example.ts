import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { PG_URL, createMysqlTestDatabase, createPgTestDatabase, dropMysqlDatabase, dropPgDatabase } from "../support/targets.ts";

const run = promisify(execFile);
const TSX = resolve("node_modules/.bin/tsx");

/**
 * Runs the documented example `file` (docs/jobs.md, docs/workflows.md) as a user would (`npx tsx <file> <adapter>`,
 * in a directory of its own) on SQLite, PostgreSQL and MariaDB (each on a
 * database of its own), and expects its output lines to be `expected`.
 */
export async function describeExample(file: string, what: string, expected: readonly string[]): Promise<void> {
  const name = file.replace(/^examples\/|\.ts$/g, "");
  const pgDb = await createPgTestDatabase("docket_example", `the ${name} example on PostgreSQL`);
  const mysqlDb = await createMysqlTestDatabase("docket_example", `the ${name} example on MariaDB`);
  const dir = mkdtempSync(join(tmpdir(), `docket-${name}-`));
  afterAll(async () => {
    if (pgDb) await dropPgDatabase(PG_URL, pgDb.database);
    if (mysqlDb) await dropMysqlDatabase(mysqlDb.database);
    rmSync(dir, { recursive: true, force: true });
  });
  describe(`${file} (the documented example)`, () => {
    const cases: [string, Record<string, string> | null][] = [
      ["sqlite", {}],
      ["postgres", pgDb ? { DOCKET_PG_URL: pgDb.url } : null],
      ["mysql", mysqlDb ? { DOCKET_MYSQL_URL: mysqlDb.url } : null],
    ];
    for (const [adapter, env] of cases) {
      it.skipIf(env === null)(`${what}, on ${adapter}`, async () => {
        const { stdout } = await run(TSX, [resolve(file), adapter], { cwd: dir, env: { ...process.env, ...env }, timeout: 60_000 });
        console.log(`${adapter}:\n${stdout}`);
        expect(stdout.trim().split("\n")).toEqual(expected);
      });
    }
  });
}
