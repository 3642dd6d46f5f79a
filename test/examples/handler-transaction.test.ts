import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { PG_URL, createMysqlTestDatabase, createPgTestDatabase, dropMysqlDatabase, dropPgDatabase } from "../support/targets.ts";

const run = promisify(execFile);
const EXAMPLE = resolve("examples/handler-transaction.ts");
const TSX = resolve("node_modules/.bin/tsx");
const EXPECTED = ["order 1: job succeeded", "order 2: lease lost, its transaction rolled back", "shipments: [1]; order 2's job cancelled"];

const pgDb = await createPgTestDatabase("docket_example", "the ctx.transaction example on PostgreSQL");
const mysqlDb = await createMysqlTestDatabase("docket_example", "the ctx.transaction example on MariaDB");
const dir = mkdtempSync(join(tmpdir(), "docket-tx-example-"));
afterAll(async () => {
  if (pgDb) await dropPgDatabase(PG_URL, pgDb.database);
  if (mysqlDb) await dropMysqlDatabase(mysqlDb.database);
  rmSync(dir, { recursive: true, force: true });
});

/** The README's ctx.transaction example, run as a user would, on every adapter. */
describe("examples/handler-transaction.ts (the README example)", () => {
  const cases: [string, Record<string, string> | null][] = [
    ["sqlite", {}],
    ["postgres", pgDb ? { DOCKET_PG_URL: pgDb.url } : null],
    ["mysql", mysqlDb ? { DOCKET_MYSQL_URL: mysqlDb.url } : null],
  ];
  for (const [adapter, env] of cases) {
    it.skipIf(env === null)(`prints that the shipped order has its row and the cancelled one's transaction rolled back, on ${adapter}`, async () => {
      const { stdout } = await run(TSX, [EXAMPLE, adapter], { cwd: dir, env: { ...process.env, ...env }, timeout: 60_000 });
      console.log(`${adapter}:\n${stdout}`);
      expect(stdout.trim().split("\n")).toEqual(EXPECTED);
    });
  }
});
