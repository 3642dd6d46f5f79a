import { afterAll, describe, it } from "vitest";
import pg from "pg";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import { conformanceCases, runCase, unmetNeeds, type AdapterTarget, type TestStore } from "../../src/testing/index.ts";
import { startPrivatePgbouncer } from "../support/private-pgbouncer.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../support/targets.ts";

/**
 * The portable conformance kit with every statement through PgBouncer in
 * transaction mode, configured as docs/databases.md ("PgBouncer") says to run behind it:
 * `preparedStatements: false`, and LISTEN on its own connection to the
 * server (`listenConnectionString`). Migrations run through the pooler too.
 * Admin statements of the cases (`execute`) go to the server directly.
 */
const what = "the conformance kit through PgBouncer";
const created = await createPgTestDatabase("docket_bouncer_kit", what);
// Cases hold up to a few sessions at once (one held in a transaction while others go on): enough server connections for them.
const bouncer = created ? await startPrivatePgbouncer(what, 8) : null;

let stores = 0;
const admin = created ? new pg.Pool({ connectionString: created.url, max: 2 }) : null;
const target: AdapterTarget = {
  name: "postgres via PgBouncer",
  provides: ["sql"],
  async open(): Promise<TestStore> {
    const tablePrefix = `b${(stores++).toString(36)}_`;
    const pooled = bouncer!.urlFor(created!.url);
    return {
      tablePrefix,
      location: pooled,
      connect: async (o?: { tablePrefix?: string }) =>
        postgresAdapter({ connectionString: pooled, listenConnectionString: created!.url, preparedStatements: false, tablePrefix, max: 4, logger: null, ...o }),
      execute: async (sql) => void (await admin!.query(sql.replaceAll("{jobs}", `${tablePrefix}jobs`))),
      close: async () => undefined,
    };
  },
};

afterAll(async () => {
  await admin?.end();
  await bouncer?.destroy();
  if (created) await dropPgDatabase(PG_URL, created.database);
});

describe.skipIf(!created || !bouncer)(target.name, () => {
  for (const c of conformanceCases()) {
    const unmet = unmetNeeds(target, c);
    if (unmet.length > 0) it.skip(`${c.name} [skipped: needs ${unmet.join(", ")}]`, () => undefined);
    else it(c.name, () => runCase(target, c), c.timeoutMs ?? (c.slow ? 60_000 : 20_000));
  }
});
