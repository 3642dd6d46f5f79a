import type { Pool, PoolClient } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import type { DocketError } from "../../src/core/errors.ts";
import { PG_URL, createPgTestDatabase, dropPgDatabase } from "../support/targets.ts";

const pg = (await import("pg")).default;
const created = await createPgTestDatabase("docket_pool", "the postgres caller-pool tests");
const url = created?.url ?? null;

/** Terminates the backend behind `client` from another connection; resolves when the server says it did. */
async function terminate(client: PoolClient): Promise<void> {
  const pid = Number((await client.query("SELECT pg_backend_pid() AS pid")).rows[0].pid);
  const admin = new pg.Client({ connectionString: url! });
  await admin.connect();
  try {
    await admin.query("SELECT pg_terminate_backend($1)", [pid]);
  } finally {
    await admin.end();
  }
}

async function until(what: string, check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** For `postgresAdapter({ pool })`: the caller's pool outlives the adapter. */
describe.skipIf(url === null)("postgres: a pool the caller passes", () => {
  let pool: Pool;
  const poolErrors: unknown[] = [];
  beforeAll(() => {
    pool = new pg.Pool({ connectionString: url!, max: 3 });
    pool.on("error", (error) => void poolErrors.push(error)); // the caller's duty (docs/databases.md, "Connection loss")
  });
  afterAll(async () => {
    await pool?.end();
    if (created) await dropPgDatabase(PG_URL, created.database);
  });

  it("a client the caller checks out whose backend is terminated reaches onError, not the process", async () => {
    const adapter = postgresAdapter({ pool: pool as never });
    const seen: DocketError[] = [];
    const unsubscribe = adapter.onError!((error) => void seen.push(error));
    try {
      await adapter.migrate();
      const client = await pool.connect();
      try {
        await terminate(client);
        await until("the terminated client reported through onError", () => seen.length > 0);
        expect(seen[0]!.code).toBe("ADAPTER_ERROR");
        expect(String((seen[0]!.cause as Error | undefined)?.message)).toMatch(/terminat/);
      } finally {
        client.release(true);
      }
    } finally {
      unsubscribe();
      await adapter.close();
    }
  });

  it("closed adapters leave no listeners on the caller's pool or its clients, and hear nothing after close", async () => {
    const events = ["acquire", "release", "error", "connect", "remove"];
    const poolListeners = () => events.map((e) => `${e}:${pool.listenerCount(e)}`);
    const probe = await pool.connect();
    const clientBefore = probe.listenerCount("error");
    probe.release();
    const poolBefore = poolListeners();

    const heardAfterClose: DocketError[] = [];
    for (let i = 0; i < 12; i++) {
      const adapter = postgresAdapter({ pool: pool as never });
      adapter.onError!((error) => void heardAfterClose.push(error));
      await adapter.migrate(); // checks a client out and back in
      await adapter.get({ id: 1 });
      await adapter.close();
    }

    expect(poolListeners()).toEqual(poolBefore);
    const client = await pool.connect();
    try {
      expect(client.listenerCount("error")).toBe(clientBefore);
      let ownListenerRan = false;
      client.on("error", () => void (ownListenerRan = true)); // the caller guards its own client
      await terminate(client);
      await until("the caller's own listener ran", () => ownListenerRan);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(heardAfterClose.map((e) => e.message)).toEqual([]);
    } finally {
      client.release(true);
    }
  });
});
