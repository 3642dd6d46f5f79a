import { afterAll, describe, expect, it } from "vitest";
import { mysqlAdapter } from "../../src/adapters/mysql/index.ts";
import { newJob } from "../../src/testing/conformance/helpers.ts";
import { tapDialect } from "../../src/testing/kysely/tapped-driver.ts";
import { createMysqlTestDatabase, dropMysqlDatabase } from "../support/targets.ts";

/**
 * The MariaDB engine reads a few server settings once (max_allowed_packet,
 * whether INSERT … RETURNING exists, the auto-increment step, Galera) and
 * shares a read in flight between callers on the pool. A caller inside a
 * transaction must not wait for a read that went to the pool: the pool may
 * have no connection to give it but the ones those transactions hold. (Seen
 * in bench/fairness.ts: 100 producers on a pool of 40 stopped for good, 40
 * transactions open and idle, nothing stored.)
 */
const created = await createMysqlTestDatabase("docket_shared_reads", "the mysql shared-read tests");

afterAll(async () => {
  if (created) await dropMysqlDatabase(created.database);
});

const within = <T>(ms: number, what: string, p: Promise<T>): Promise<T> =>
  Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms))]);

describe.skipIf(!created)("mysql: settings read once", () => {
  it("a transaction that needs a setting whose read waits for the pool's only connection, which it holds, still finishes", async () => {
    let limit: Promise<number> | null = null;
    // Once the batch's transaction has begun on the only connection, the payload limit's read of max_allowed_packet
    // goes to the pool, where it waits for that connection; the transaction then needs that setting to size its INSERT.
    const adapter = mysqlAdapter({
      uri: created!.url,
      tablePrefix: "shared_",
      connectionLimit: 1,
      instrument: { wrapDialect: (d) => tapDialect(d, { control: (kind) => void (kind === "begin" && (limit ??= adapter.payloadLimit!({}))) }) },
    });
    try {
      await adapter.migrate();
      const now = Date.now();
      // A fair batch: its key's row is written in a transaction before its jobs are.
      const fair = { queue: "q", runAt: now, fairness: { key: "a", weight: 1 } };
      const records = await within(10_000, "the batch", adapter.enqueue({ jobs: [newJob(fair), newJob(fair)], now }));
      expect(limit).not.toBeNull();
      const bytes = await within(10_000, "the payload limit", limit!);
      expect(records).toHaveLength(2);
      expect(bytes).toBeGreaterThan(0);
    } finally {
      await adapter.close();
    }
  });
});
