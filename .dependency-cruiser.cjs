/**
 * The import rules between docket's parts, checked on every `npm test` by
 * test/architecture.test.ts (dependency-cruiser). Arrows point downward only:
 *
 *   cli, otel, dashboard → client → worker → core ← adapters
 *
 * core is policy (no SQL, no driver, no upward import); adapters implement
 * core's contract and know nothing of each other (except the shared kysely
 * store), of the client, the worker or tests; the worker sees the client only
 * through its own host interface (src/worker/host.ts).
 */
const drivers = "^node_modules/(kysely|pg|mysql2|better-sqlite3)/";
module.exports = {
  forbidden: [
    {
      name: "core-is-policy",
      comment: "src/core imports only src/core: no client, worker, dashboard, adapter, testing, cli or otel code.",
      severity: "error",
      from: { path: "^src/core/" },
      to: { path: "^src/", pathNot: "^src/core/" },
    },
    {
      name: "core-has-no-driver",
      comment: "src/core holds no SQL: it imports neither kysely nor a database driver.",
      severity: "error",
      from: { path: "^src/core/" },
      to: { path: drivers },
    },
    {
      name: "adapters-below-client",
      comment: "An adapter imports core (and the shared kysely store), never the client, the worker, the dashboard, cli, otel or test code.",
      severity: "error",
      from: { path: "^src/adapters/" },
      to: { path: "^src/(client|worker|dashboard|cli|otel|testing)/|^test/" },
    },
    {
      name: "adapters-apart",
      comment: "An adapter does not import another adapter; sqlite, postgres and mysql share src/adapters/kysely.",
      severity: "error",
      from: { path: "^src/adapters/([^/]+)/" },
      to: { path: "^src/adapters/", pathNot: ["^src/adapters/$1/", "^src/adapters/kysely/"] },
    },
    {
      name: "memory-has-no-sql",
      comment: "The memory adapter proves the contract without SQL: no kysely store, no kysely, no driver.",
      severity: "error",
      from: { path: "^src/adapters/memory/" },
      to: { path: ["^src/adapters/kysely/", drivers] },
    },
    {
      name: "worker-sees-host-only",
      comment: "The worker depends on its host interface, not on the client (Docket) itself.",
      severity: "error",
      from: { path: "^src/worker/" },
      to: { path: "^src/(client|dashboard|cli|otel|testing|adapters)/" },
    },
    {
      name: "client-not-above-its-callers",
      comment: "The client does not import the CLI, OpenTelemetry glue or test code.",
      severity: "error",
      from: { path: "^src/client/" },
      to: { path: "^src/(cli|otel|testing)/|^test/" },
    },
    {
      name: "portable-kit-has-no-kysely",
      comment: "docket/testing runs on DocketAdapter alone; kysely-specific parts live in src/testing/kysely (docket/testing/kysely).",
      severity: "error",
      from: { path: "^src/testing/", pathNot: "^src/testing/kysely/" },
      to: { path: ["^node_modules/kysely/", "^src/adapters/kysely/", "^src/testing/kysely/"] },
    },
    {
      name: "no-cycles",
      comment: "No import cycle between modules of src (type-only imports included).",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".js"] },
  },
};
