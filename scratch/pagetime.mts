import { postgresAdapter } from "../src/adapters/postgres/index.ts";
import { Docket } from "../src/index.ts";
import { tapDialect } from "../src/testing/kysely/tapped-driver.ts";
const sent: { sql: string; t: number }[] = [];
let t0 = 0;
const adapter = postgresAdapter({ connectionString: "postgres://postgres@127.0.0.1:5432/docket_lp2", instrument: { wrapDialect: (d) => tapDialect(d, { query: (s) => void sent.push({ sql: s, t: performance.now() - t0 }) }) } });
const d = new Docket({ adapter });
await d.migrate();
const h = d.dashboard();
for (const path of ["/", "/dead"]) {
  for (let i = 0; i < 3; i++) { sent.length = 0; t0 = performance.now(); const r = await h(new Request("http://x" + path)); await r.text(); console.log(path, (performance.now() - t0).toFixed(1)); }
  for (const s of sent) console.log("  ", s.t.toFixed(1), s.sql.replace(/\s+/g, " ").slice(0, 160));
}
await d.close();
