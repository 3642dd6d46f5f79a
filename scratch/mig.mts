import { postgresAdapter } from "/work/main/src/adapters/postgres/index.ts";
import { Docket } from "/work/main/src/index.ts";
const d = new Docket({ adapter: postgresAdapter({ connectionString: "postgres://postgres@127.0.0.1:5432/docket_lp2" }) });
await d.migrate(); await d.close();
