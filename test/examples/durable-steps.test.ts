import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { PG_URL, createMysqlTestDatabase, createPgTestDatabase, dropMysqlDatabase, dropPgDatabase } from "../support/targets.ts";

const run = promisify(execFile);
const EXAMPLE = resolve("examples/durable-steps.ts");
const TSX = resolve("node_modules/.bin/tsx");
const EXPECTED = [
  "job succeeded after 2 attempts, card charged 1 time(s)",
  'steps: charge {"chargeId":"ch_42","cents":1999}; email {"to":"customer@example.com","about":"ch_42"}',
];

const pgDb = await createPgTestDatabase("docket_example", "the durable-steps example on PostgreSQL");
const mysqlDb = await createMysqlTestDatabase("docket_example", "the durable-steps example on MariaDB");
const dir = mkdtempSync(join(tmpdir(), "docket-steps-example-"));
afterAll(async () => {
  if (pgDb) await dropPgDatabase(PG_URL, pgDb.database);
  if (mysqlDb) await dropMysqlDatabase(mysqlDb.database);
  rmSync(dir, { recursive: true, force: true });
});

/** The README's durable-steps example, run as a user would, on every adapter. */
describe("examples/durable-steps.ts (the README example)", () => {
  const cases: [string, Record<string, string> | null][] = [
    ["sqlite", {}],
    ["postgres", pgDb ? { DOCKET_PG_URL: pgDb.url } : null],
    ["mysql", mysqlDb ? { DOCKET_MYSQL_URL: mysqlDb.url } : null],
  ];
  for (const [adapter, env] of cases) {
    it.skipIf(env === null)(`prints that the retried job charged the card once and recorded both steps, on ${adapter}`, async () => {
      const { stdout } = await run(TSX, [EXAMPLE, adapter], { cwd: dir, env: { ...process.env, ...env }, timeout: 60_000 });
      console.log(`${adapter}:\n${stdout}`);
      expect(stdout.trim().split("\n")).toEqual(EXPECTED);
    });
  }
});
