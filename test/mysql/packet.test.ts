import { afterAll, describe, expect, it } from "vitest";
import { mysqlAdapter } from "../../src/adapters/mysql/index.ts";
import type { NewJob } from "../../src/core/adapter.ts";
import { Docket } from "../../src/client/docket.ts";
import { AdapterError, PayloadTooLargeError } from "../../src/core/errors.ts";
import { createMysqlTestDatabase, dropMysqlDatabase } from "../support/targets.ts";

/**
 * MariaDB refuses a statement over `max_allowed_packet` and closes the
 * connection; mysql2 reports the refusal as an ordinary error. These tests
 * read the shared server's limit (never change it) and send more than it.
 */
const created = await createMysqlTestDatabase("docket_pkt", "the mysql packet-size tests");
const mysql = (await import("mysql2/promise")).default;
const packet = created ? await readPacket(created.url) : 0;

async function readPacket(url: string): Promise<number> {
  const c = await mysql.createConnection({ uri: url });
  try {
    const [rows] = await c.query("SELECT @@max_allowed_packet AS max");
    return Number((rows as { max: number }[])[0]!.max);
  } finally {
    await c.end();
  }
}

async function countJobs(prefix: string): Promise<number> {
  const c = await mysql.createConnection({ uri: created!.url });
  try {
    const [rows] = await c.query(`SELECT count(*) AS n FROM ${prefix}jobs`);
    return Number((rows as { n: number }[])[0]!.n);
  } finally {
    await c.end();
  }
}

let prefixes = 0;
/** A migrated docket on its own table prefix, over a pool of ONE connection: a connection the server closed would be the next call's. */
async function openDocket(how: "uri" | "pool" = "uri") {
  const tablePrefix = `pkt${prefixes++}_`;
  const pool = how === "pool" ? (await import("mysql2")).default.createPool({ uri: created!.url, connectionLimit: 1 }) : null;
  if (pool) pool.on("connection", (c) => c.on("error", () => undefined));
  const adapter = mysqlAdapter({ ...(pool ? { pool: pool as never } : { uri: created!.url, connectionLimit: 1 }), tablePrefix });
  const docket = new Docket({ adapter, maxPayloadBytes: 1 << 30 });
  await docket.migrate();
  const close = async () => {
    await adapter.close();
    await new Promise<void>((resolve) => (pool ? pool.end(() => resolve()) : resolve()));
  };
  return { docket, adapter, tablePrefix, close };
}

function newJob(payload: string): NewJob {
  return { task: "t", queue: "default", payload, state: "ready", priority: 0, runAt: Date.now(), maxAttempts: 1, backoff: null };
}

describe.skipIf(created === null)("mysql: payloads and statements over max_allowed_packet", () => {
  afterAll(async () => {
    if (created) await dropMysqlDatabase(created.database);
  });

  it("a payload over the server's limit is PayloadTooLargeError, writes nothing, and the next calls on the same (only) connection work", async () => {
    const { docket, tablePrefix, close } = await openDocket();
    try {
      const big = "x".repeat(packet + 1024 * 1024);
      for (let round = 0; round < 3; round++) {
        const refused = await docket.enqueue("t", big).then(
          () => null,
          (error: unknown) => error,
        );
        expect(refused).toBeInstanceOf(PayloadTooLargeError);
        expect((refused as PayloadTooLargeError).limit).toBeLessThan(packet);
        expect(await countJobs(tablePrefix)).toBe(round);
        await docket.enqueue("t", { round });
        expect((await docket.stats()).queues.find((q) => q.queue === "default")?.counts.ready).toBe(round + 1);
      }
      // At the limit (JSON quotes included) a payload is stored, and reads back whole.
      const limit = await docket.payloadLimit();
      expect(limit).toBeLessThan(packet);
      const largest = await docket.enqueue("t", "y".repeat(limit - 2));
      expect((await docket.get(largest.id))?.payload).toHaveLength(limit - 2);
    } finally {
      await close();
    }
  });

  it("a schedule whose payload is over the server's limit is refused with PayloadTooLargeError; nothing is stored", async () => {
    const { docket, close } = await openDocket();
    try {
      const put = docket.schedules.put("big", { cron: "0 * * * *", task: "t", payload: "s".repeat(packet + 1024) });
      await expect(put).rejects.toBeInstanceOf(PayloadTooLargeError);
      expect(await docket.schedules.list()).toEqual([]);
    } finally {
      await close();
    }
  });

  it("enqueueMany whose payloads each fit but together exceed the packet stores them all", async () => {
    const { docket, tablePrefix, close } = await openDocket();
    try {
      const each = Math.floor(packet / 3) + 1024;
      const items = ["a", "b", "c"].map((c) => ({ task: "t", payload: c.repeat(each) }));
      const jobs = await docket.enqueueMany(items);
      expect(jobs.map((j) => j.created)).toEqual([true, true, true]);
      for (const [i, job] of jobs.entries()) expect((await docket.get(job.id))?.payload).toBe(items[i]!.payload);
      await docket.enqueue("t", "after");
      expect(await countJobs(tablePrefix)).toBe(4);
    } finally {
      await close();
    }
  });

  for (const how of ["uri", "pool"] as const) {
    it(`a statement the server refuses for its size fails, and the connection it closed is not handed out again (${how === "uri" ? "its own pool" : "a pool the caller passes"})`, async () => {
      const { docket, adapter, tablePrefix, close } = await openDocket(how);
      try {
        const big = JSON.stringify("z".repeat(packet + 1024));
        for (let round = 0; round < 3; round++) {
          // Past the core's check, straight to the adapter: one autocommit INSERT, then a batch in a transaction.
          for (const jobs of [[newJob(big)], [newJob(big), newJob("1")]]) {
            await expect(adapter.enqueue({ jobs, now: Date.now() })).rejects.toBeInstanceOf(AdapterError);
            const [small] = await adapter.enqueue({ jobs: [newJob(JSON.stringify({ round }))], now: Date.now() });
            expect(small?.created).toBe(true);
            expect(await docket.stats()).toBeTruthy();
          }
        }
        expect(await countJobs(tablePrefix)).toBe(6);
      } finally {
        await close();
      }
    });
  }

  it("a handler's return value over the server's limit fails the attempt with the reason; the worker goes on", async () => {
    const { docket, close } = await openDocket();
    const w = docket.worker({ pollMs: 20, logger: null, handlers: { big: () => "r".repeat(packet + 1024), small: () => "ok" } });
    try {
      const big = await docket.enqueue("big", {}, { maxAttempts: 1 });
      const small = await docket.enqueue("small", {}, { maxAttempts: 1 });
      await w.start();
      const dead = await docket.waitFor(big.id, { timeoutMs: 15_000, pollMs: 20 });
      expect(dead.state).toBe("dead");
      expect(dead.lastError ?? "").toMatch(/return value cannot be stored as its result: payload is \d+ bytes; the limit is/);
      const done = await docket.waitFor(small.id, { timeoutMs: 15_000, pollMs: 20 });
      expect(done.result).toBe("ok");
    } finally {
      await w.stop();
      await close();
    }
  }, 40_000);
});
