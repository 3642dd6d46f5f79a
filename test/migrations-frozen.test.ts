import { describe, expect, it } from "vitest";
import { JOB_STATES } from "../src/core/states.ts";
import { SCHEMA_WAITING_STATES } from "../src/adapters/kysely/ddl.ts";
import { migrations as sqliteMigrations } from "../src/adapters/sqlite/migrations.ts";
import { migrations as postgresMigrations } from "../src/adapters/postgres/migrations.ts";
import { migrations as mysqlMigrations } from "../src/adapters/mysql/migrations.ts";

const ENGINES = { sqlite: sqliteMigrations, postgres: postgresMigrations, mysql: mysqlMigrations };

/** The state CHECK of schema version 1's jobs table, as the engine's migrations spell it now. */
function v1StateCheck(migrations: typeof sqliteMigrations): string {
  const create = migrations("p_").find((m) => m.version === 1)!.statements[0]!;
  return /CHECK \(state IN \([^)]*\)\)/.exec(create)![0];
}

describe("shipped migrations are frozen text", () => {
  for (const [name, migrations] of Object.entries(ENGINES)) {
    it(`${name}: a state added to the core's list does not change the text of a shipped migration`, () => {
      const before = JSON.stringify(migrations("p_"));
      const states = JOB_STATES as unknown as string[];
      states.push("paused_by_test");
      try {
        expect(v1StateCheck(migrations)).toBe("CHECK (state IN ('scheduled', 'ready', 'blocked', 'running', 'succeeded', 'dead', 'cancelled'))");
        expect(JSON.stringify(migrations("p_"))).toBe(before);
      } finally {
        states.pop();
      }
    });
  }

  it("the schema's latest state check lists every state the core knows (a new state needs a migration that replaces it)", () => {
    expect([...SCHEMA_WAITING_STATES]).toEqual([...JOB_STATES]);
  });
});
