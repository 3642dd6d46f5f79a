import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { PG_URL, createMysqlTestDatabase, createPgTestDatabase, dropMysqlDatabase, dropPgDatabase } from "../support/targets.ts";

const run = promisify(execFile);
const EXAMPLE = resolve("examples/transactional-enqueue.ts");
const TSX = resolve("node_modules/.bin/tsx");
const EXPECTED = ["committed: order 1 stored, its job ready", "rolled back (payment declined): order 2 absent, its job absent"];

const pgDb = await createPgTestDatabase("docket_example", "the transactional-enqueue example on PostgreSQL");
const mysqlDb = await createMysqlTestDatabase("docket_example", "the transactional-enqueue example on MariaDB");
const dir = mkdtempSync(join(tmpdir(), "docket-example-"));
afterAll(async () => {
  if (pgDb) await dropPgDatabase(PG_URL, pgDb.database);
  if (mysqlDb) await dropMysqlDatabase(mysqlDb.database);
  rmSync(dir, { recursive: true, force: true });
});

/** The README's transactional-enqueue example, run as a user would, on every adapter. */
describe("examples/transactional-enqueue.ts (the README example)", () => {
  const cases: [string, Record<string, string> | null][] = [
    ["sqlite", {}],
    ["postgres", pgDb ? { DOCKET_PG_URL: pgDb.url } : null],
    ["mysql", mysqlDb ? { DOCKET_MYSQL_URL: mysqlDb.url } : null],
  ];
  for (const [adapter, env] of cases) {
    it.skipIf(env === null)(`prints that the committed order has its job and the rolled-back one has neither, on ${adapter}`, async () => {
      const { stdout } = await run(TSX, [EXAMPLE, adapter], { cwd: dir, env: { ...process.env, ...env }, timeout: 60_000 });
      console.log(`${adapter}:\n${stdout}`);
      expect(stdout.trim().split("\n")).toEqual(EXPECTED);
    });
  }
});
