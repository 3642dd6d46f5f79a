import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { memoryAdapter } from "../../src/adapters/memory/index.ts";
import type { NewJob } from "../../src/core/adapter.ts";

/** What the memory adapter guarantees beyond the conformance suite: copies out, handles on one state, no SQL. */
describe("docket/memory adapter", () => {
  const job = (overrides: Partial<NewJob> = {}): NewJob => ({ task: "t", queue: "default", payload: "{}", state: "ready", priority: 0, runAt: 0, maxAttempts: 3, backoff: null, ...overrides });

  it("returns copies: mutating a returned record changes nothing stored", async () => {
    const a = memoryAdapter();
    await a.migrate();
    const [stored] = await a.enqueue({ jobs: [job()], now: 1 });
    stored!.state = "dead";
    stored!.payload = "tampered";
    const [claimed] = await a.claim({ queues: ["default"], limit: 1, now: 1, leaseToken: "x", leaseExpiresAt: 100 });
    claimed!.leaseToken = "forged";
    const got = await a.get({ id: stored!.id });
    expect([got?.state, got?.payload, got?.leaseToken]).toEqual(["running", "{}", "x"]);
    got!.attempt = 99;
    expect((await a.list({ limit: 10 }))[0]?.attempt).toBe(1);
  });

  it("connect() is another handle on the same jobs; closing one handle leaves the others working", async () => {
    const a = memoryAdapter();
    await a.migrate();
    const b = a.connect();
    const [stored] = await a.enqueue({ jobs: [job()], now: 1 });
    expect((await b.get({ id: stored!.id }))?.id).toBe(stored!.id);
    await a.close();
    await expect(a.get({ id: stored!.id })).rejects.toMatchObject({ code: "CLOSED" });
    expect((await b.claim({ queues: ["default"], limit: 5, now: 1, leaseToken: "y", leaseExpiresAt: 100 })).length).toBe(1);
  });

  it("a transaction option is InvalidArgumentError (a memory store has none) and stores nothing", async () => {
    const a = memoryAdapter();
    await a.migrate();
    await expect(a.enqueue({ jobs: [job()], now: 1, transaction: {} })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    expect(await a.list({ limit: 10 })).toEqual([]);
  });

  it("ready notices reach every handle's subscribers on a later turn", async () => {
    const a = memoryAdapter();
    await a.migrate();
    const seen: unknown[] = [];
    const off = a.connect().onReady((n) => seen.push(n));
    await a.enqueue({ jobs: [job({ queue: "q" })], now: 1 });
    expect(seen).toEqual([]);
    await new Promise((r) => setTimeout(r, 5));
    expect(seen).toEqual([{ queue: "q", due: false }]);
    off();
  });

  it("holds no SQL: no file of src/adapters/memory imports kysely, a driver or another adapter", () => {
    const dir = join(import.meta.dirname, "../../src/adapters/memory");
    for (const file of readdirSync(dir)) {
      const imports = [...readFileSync(join(dir, file), "utf8").matchAll(/from "([^"]+)"/g)].map((m) => m[1]!);
      for (const spec of imports) expect(spec, `${file} imports ${spec}`).toMatch(/^\.\/|^\.\.\/\.\.\/core\//);
    }
  });
});
