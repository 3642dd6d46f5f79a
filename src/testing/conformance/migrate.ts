import assert from "node:assert/strict";
import { SchemaTooNewError } from "../../core/errors.ts";
import type { ConformanceCase } from "../harness.ts";
import { insert } from "./helpers.ts";

export const migrateCases: ConformanceCase[] = [
  {
    name: "migrate › before migrate(), every call says so: SCHEMA_MISSING naming the table and 'call migrate()'",
    unmigrated: true,
    async run(t) {
      const d = t.docket();
      const calls: [string, () => Promise<unknown>][] = [
        ["enqueue", () => d.enqueue("t", {})],
        ["claim", () => t.adapter.claim({ queues: ["default"], limit: 1, now: t.clock.now(), leaseToken: "x", leaseExpiresAt: t.clock.now() + 1 })],
        ["get", () => d.get(1)],
        ["list", () => d.list()],
      ];
      for (const [what, call] of calls) {
        await assert.rejects(call(), (e: { code?: string; message?: string; table?: string }) => {
          assert.equal(e.code, "SCHEMA_MISSING", `${what}: ${e.message}`);
          assert.match(e.message ?? "", new RegExp(`table ${t.store.tablePrefix}\\w+ does not exist: call migrate\\(\\)`, "i"), what);
          return true;
        });
      }
    },
  },
  {
    name: "migrate › a second run applies nothing and keeps the data",
    async run(t) {
      const job = await insert(t);
      const again = await t.adapter.migrate();
      assert.deepEqual(again.applied, []);
      assert.ok(again.version >= 1);
      assert.equal((await t.adapter.get({ id: job.id }))?.id, job.id);
    },
  },
  {
    name: "migrate › four concurrent first runs on separate connections apply each version exactly once",
    unmigrated: true,
    async run(t) {
      const adapters = [t.adapter, ...(await Promise.all([t.connect(), t.connect(), t.connect()]))];
      const results = await Promise.all(adapters.map((a) => a.migrate()));
      const applied = results.flatMap((r) => r.applied).sort((a, b) => a - b);
      const latest = results[0]!.version;
      assert.deepEqual(applied, Array.from({ length: latest }, (_, i) => i + 1), "every version applied once in all");
      await insert(t);
    },
  },
  {
    name: "migrate › refuses a database migrated by a newer docket",
    needs: ["sql"],
    async run(t) {
      await t.execute(`INSERT INTO ${t.store.tablePrefix}migrations (version) VALUES (9999)`);
      await assert.rejects(() => t.adapter.migrate(), (e: unknown) => e instanceof SchemaTooNewError && e.code === "SCHEMA_TOO_NEW");
    },
  },
  {
    name: "migrate › a tablePrefix with upper case (or not [a-z_][a-z0-9_]*, or over 40 characters) is INVALID_ARGUMENT when the adapter is made, and nothing is created",
    needs: ["sql"],
    unmigrated: true,
    async run(t) {
      // PostgreSQL folds unquoted DDL names to lower case while queries quote them: "Docket_" would migrate docket_'s tables.
      const lower = `${t.store.tablePrefix}x_`;
      for (const tablePrefix of [lower.toUpperCase(), `${t.store.tablePrefix}X_`, "1x_", "a-b_", "x".repeat(41)]) {
        await assert.rejects(
          async () => {
            const adapter = await t.connect({ tablePrefix });
            await adapter.migrate();
          },
          (e: { code?: string; message?: string }) => e.code === "INVALID_ARGUMENT" && (e.message ?? "").includes("[a-z_][a-z0-9_]"),
          tablePrefix,
        );
      }
      for (const table of [`${lower}jobs`, `${lower}migrations`, `${t.store.tablePrefix}jobs`, `${t.store.tablePrefix}migrations`]) {
        await assert.rejects(t.execute(`SELECT 1 FROM ${table}`), Error, `${table} was created`);
      }
    },
  },
  {
    name: "schema › rejects an unknown state (CHECK constraint)",
    needs: ["sql"],
    async run(t) {
      const job = await insert(t);
      await assert.rejects(() => t.execute(`UPDATE {jobs} SET state = 'bogus' WHERE id = ${job.id}`));
      assert.equal((await t.adapter.get({ id: job.id }))?.state, "ready");
    },
  },
  {
    name: "schema › rejects a running job without a lease (CHECK constraint)",
    needs: ["sql"],
    async run(t) {
      const job = await insert(t);
      await assert.rejects(() => t.execute(`UPDATE {jobs} SET state = 'running' WHERE id = ${job.id}`));
      assert.equal((await t.adapter.get({ id: job.id }))?.state, "ready");
    },
  },
];
