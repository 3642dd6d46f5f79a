import assert from "node:assert/strict";
import type { KyselyConformanceCase } from "../harness.ts";
import { tapDialect } from "../tapped-driver.ts";

/** Migrate, as the statements it sends show (a tap on the adapter's driver). */
export const kyselyMigrateCases: KyselyConformanceCase[] = [
  {
    name: "migrate › on a current schema, migrate() sends only reads (no DDL, no lock, no transaction), so a role without DDL rights can call it",
    async run(t) {
      const sent: string[] = [];
      const adapter = await t.connect({
        instrument: { wrapDialect: (d) => tapDialect(d, { query: (sql) => void sent.push(sql), control: (kind) => void sent.push(kind) }) },
      });
      const again = await adapter.migrate();
      assert.deepEqual(again.applied, []);
      assert.ok(again.version >= 1);
      assert.ok(sent.length > 0, "the version was read");
      assert.deepEqual(sent.filter((s) => !/^\s*select\b/i.test(s)), [], "statements other than reads");
      assert.deepEqual(sent.filter((s) => /lock|for update|for share/i.test(s)), [], "locks");
    },
  },
];
