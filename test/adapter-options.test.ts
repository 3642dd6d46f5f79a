import { describe, expect, it } from "vitest";
import { InvalidArgumentError } from "../src/core/errors.ts";
import { Docket } from "../src/client/docket.ts";
import { sqliteAdapter } from "../src/adapters/sqlite/index.ts";
import { postgresAdapter } from "../src/adapters/postgres/index.ts";
import { mysqlAdapter } from "../src/adapters/mysql/index.ts";

const huge = "x".repeat(1_000_000);

/** Refused as InvalidArgumentError, with a message short whatever was passed. */
function refusedBriefly(make: () => unknown): string {
  let caught: unknown = null;
  try {
    make();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(InvalidArgumentError);
  const message = (caught as Error).message;
  expect(message.length).toBeLessThan(400);
  return message;
}

// Adapter construction validates before it opens anything, so no server is needed here.
describe("adapter options", () => {
  it("an adapter made without options is InvalidArgumentError naming what it needs (was a TypeError from destructuring)", () => {
    expect(refusedBriefly(() => (sqliteAdapter as (o?: unknown) => unknown)())).toMatch(/sqliteAdapter needs options/);
    expect(refusedBriefly(() => (postgresAdapter as (o?: unknown) => unknown)())).toMatch(/postgresAdapter needs options/);
    expect(refusedBriefly(() => (mysqlAdapter as (o?: unknown) => unknown)())).toMatch(/mysqlAdapter needs options/);
  });

  it("a value quoted in an adapter's or a worker's option message is cut, whatever its length", () => {
    const cut = /…\(1000000 chars\)/;
    expect(refusedBriefly(() => sqliteAdapter({ filename: ":memory:", synchronous: huge as "full" }))).toMatch(cut);
    expect(refusedBriefly(() => sqliteAdapter({ filename: ":memory:", busyTimeoutMs: huge as unknown as number }))).toMatch(cut);
    expect(refusedBriefly(() => sqliteAdapter({ filename: ":memory:", tablePrefix: huge }))).toMatch(cut);
    expect(refusedBriefly(() => postgresAdapter({ connectionString: "postgres://127.0.0.1/x", max: huge as unknown as number }))).toMatch(cut);
    expect(refusedBriefly(() => mysqlAdapter({ uri: "mysql://127.0.0.1/x", connectionLimit: huge as unknown as number }))).toMatch(cut);
    const docket = new Docket({ adapter: sqliteAdapter({ filename: ":memory:" }) });
    expect(refusedBriefly(() => docket.worker({ handlers: { [huge]: "not a function" as never } }))).toMatch(cut);
  });
});
