/**
 * A PostgreSQL address that accepts connections but never answers (a hung
 * server, a proxy waiting on a dead primary): docket's own pools give up on
 * a new connection after `connect_timeout` seconds (URL parameter, default
 * 10), so statements fail and a worker stops, instead of waiting forever.
 * Needs no PostgreSQL server: the address is a local socket that stays silent.
 */
import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Docket } from "../../src/index.ts";
import { postgresAdapter } from "../../src/adapters/postgres/index.ts";
import { connectTimeoutMs, DEFAULT_CONNECT_TIMEOUT_S, openPgPool } from "../../src/adapters/postgres/postgres-adapter.ts";
import { PG_URL } from "../support/targets.ts";
import { DocketError, InvalidArgumentError } from "../../src/core/errors.ts";

let server: Server;
let port = 0;
const sockets = new Set<Socket>();

beforeAll(async () => {
  server = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as { port: number }).port;
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => server.close(resolve));
});

describe("postgres: a server that accepts connections and never answers", () => {
  it("a statement fails after the URL's connect_timeout with a typed error, not hangs", async () => {
    const docket = new Docket({ adapter: postgresAdapter({ connectionString: `postgres://postgres:s3cret@127.0.0.1:${port}/app?connect_timeout=1`, logger: null }) });
    try {
      const error = await docket.stats().then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(DocketError);
      expect(String((error as Error).message)).toMatch(/timeout/i);
      expect(String((error as Error).message)).not.toContain("s3cret");
    } finally {
      await docket.close();
    }
  }, 8_000);

  it("a worker started against it stops when asked, its claims having failed", async () => {
    const docket = new Docket({ adapter: postgresAdapter({ connectionString: `postgres://postgres@127.0.0.1:${port}/app?connect_timeout=1`, logger: null }) });
    const errors: string[] = [];
    const worker = docket.worker({
      queues: ["q"],
      pollMs: 100,
      logger: null,
      onEvent: (e) => void (e.type === "error" && errors.push(e.operation)),
      handlers: { t: () => undefined },
    });
    await worker.start();
    for (let i = 0; i < 400 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    await worker.stop();
    await docket.close();
    expect(errors.length).toBeGreaterThan(0);
  }, 12_000);

  it("connect_timeout: whole seconds from the URL, 0 for none, 10 s by default; anything else is refused without the URL in the message", () => {
    expect(DEFAULT_CONNECT_TIMEOUT_S).toBe(10);
    expect(connectTimeoutMs("postgres://u@h/db", "connectionString")).toBe(10_000);
    expect(connectTimeoutMs("postgres://u@h/db?sslmode=disable&connect_timeout=3", "connectionString")).toBe(3_000);
    expect(connectTimeoutMs("postgres://u@h/db?connect_timeout=0", "connectionString")).toBe(0);
    for (const bad of ["abc", "-1", "1.5", ""]) {
      const url = `postgres://u:s3cret@h/db?connect_timeout=${bad}`;
      expect(() => postgresAdapter({ connectionString: url })).toThrow(InvalidArgumentError);
      expect(() => postgresAdapter({ connectionString: url })).toThrow(/connect_timeout/);
      try {
        postgresAdapter({ connectionString: url });
      } catch (e) {
        expect((e as Error).message).not.toContain("s3cret");
      }
    }
    expect(() => postgresAdapter({ connectionString: "postgres://u@h/db", listenConnectionString: "postgres://u@h/db?connect_timeout=x" })).toThrow(/listenConnectionString's connect_timeout/);
  });

  it("the timeout is each new connection's, not a wait for a busy pool's free connection: a call queued past it still gets one", async () => {
    // PG_URL's server must answer (skipped below when it does not: the other cases need none).
    const url = `${PG_URL}${PG_URL.includes("?") ? "&" : "?"}connect_timeout=1`;
    const pool = (await openPgPool(url, 1)) as unknown as { connect(): Promise<{ release(): void; query(q: string): Promise<unknown> }>; end(): Promise<void> };
    let held: { release(): void; query(q: string): Promise<unknown> };
    try {
      held = await pool.connect();
    } catch (error) {
      await pool.end();
      if (process.env.DOCKET_REQUIRE_ALL_ADAPTERS === "1") throw error;
      console.warn("connect-timeout: no PostgreSQL at DOCKET_PG_URL; the busy-pool case is skipped");
      return;
    }
    const queued = pool.connect();
    await new Promise((r) => setTimeout(r, 1_500));
    held.release();
    const client = await queued;
    await client.query("select 1");
    client.release();
    await pool.end();
  }, 10_000);
});
