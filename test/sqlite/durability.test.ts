import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { sqliteAdapter } from "../../src/adapters/sqlite/index.ts";

/** "what a call returned as written is committed" must hold through a power loss. */
describe("sqlite: durability", () => {
  const cases = [
    { options: {}, expected: 2, what: "FULL by default" },
    { options: { synchronous: "normal" as const }, expected: 1, what: "NORMAL when asked" },
  ];
  for (const { options, expected, what } of cases) {
    it(`connections docket opens run with synchronous = ${what}`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "docket-sync-"));
      const database = new Database(join(dir, "jobs.db"));
      try {
        const adapter = sqliteAdapter({ database, ...options });
        await adapter.migrate();
        expect(database.pragma("synchronous", { simple: true })).toBe(expected);
        expect(database.pragma("journal_mode", { simple: true })).toBe("wal");
        await adapter.close();
      } finally {
        database.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  it("an unknown synchronous value is an InvalidArgumentError", () => {
    expect(() => sqliteAdapter({ filename: ":memory:", synchronous: "off" as "full" })).toThrow(/synchronous must be "full" or "normal"/);
  });
});
