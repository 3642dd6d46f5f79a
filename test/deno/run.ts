/**
 * `npm run test:deno`: runs the Deno conformance suite once per adapter (one
 * `deno test` each, so each prints its own Deno summary) and the node:sqlite
 * shim's own tests, then one line per suite and CI's plain total line
 * ("N passed, N failed, N skipped").
 * Exits non-zero when any run fails, including a file that cannot load or a
 * target that DOCKET_REQUIRE_ALL_ADAPTERS=1 requires but cannot reach.
 *
 *     deno run --allow-run --allow-read test/deno/run.ts [sqlite|postgres|mysql|memory|node-sqlite ...]
 */
const SUITES: Record<string, { label: string; file: string }> = {
  sqlite: { label: "deno conformance sqlite", file: "test/deno/sqlite_test.ts" },
  postgres: { label: "deno conformance postgres", file: "test/deno/postgres_test.ts" },
  mysql: { label: "deno conformance mysql", file: "test/deno/mysql_test.ts" },
  memory: { label: "deno conformance memory", file: "test/deno/memory_test.ts" },
  "node-sqlite": { label: "deno node-sqlite shim", file: "test/deno/node-sqlite_test.ts" },
  dashboard: { label: "deno dashboard (Deno.serve)", file: "test/deno/dashboard_test.ts" },
};
const FLAGS = ["--allow-net", "--allow-env", "--allow-read", "--allow-write"];

const chosen = Deno.args.length > 0 ? Deno.args : Object.keys(SUITES);
const results: { label: string; passed: number; failed: number; ignored: number; ok: boolean; failures: string[] }[] = [];
const decoder = new TextDecoder();

for (const name of chosen) {
  const suite = SUITES[name];
  if (!suite) {
    console.error(`unknown suite ${name}; expected one of ${Object.keys(SUITES).join(", ")}`);
    Deno.exit(2);
  }
  console.log(`\n== deno test: ${suite.file}`);
  const child = new Deno.Command(Deno.execPath(), {
    args: ["test", ...FLAGS, suite.file],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  let output = "";
  for await (const chunk of child.stdout) {
    await Deno.stdout.write(chunk);
    output += decoder.decode(chunk, { stream: true });
  }
  const { code } = await child.status;
  // Deno's closing line: "ok | 130 passed | 0 failed (2s)", "FAILED | 129 passed | 1 failed | 1 ignored (3s)".
  const plain = output.replaceAll(/\x1b\[[0-9;]*m/g, "");
  const summary = [...plain.matchAll(/^(ok|FAILED) \| (\d+) passed[^|]*\| (\d+) failed[^|(]*(?:\| (\d+) ignored)?/gm)].at(-1);
  // Deno's per-case lines: "name ... FAILED (12ms)"; named again at the end, so a log's tail says which.
  const failures = [...plain.matchAll(/^(.*) \.\.\. FAILED\b/gm)].map((m) => m[1]!.trim());
  results.push({
    failures: [...new Set(failures)],
    label: suite.label,
    passed: Number(summary?.[2] ?? 0),
    failed: Number(summary?.[3] ?? 0),
    ignored: Number(summary?.[4] ?? 0),
    ok: code === 0 && summary?.[1] === "ok",
  });
}

console.log("");
for (const r of results) {
  const note = r.ok ? "" : " (deno test FAILED)";
  // Ignored cases: the whole target (unavailable), or the cases needing what it does not provide (their names say which).
  const why = r.passed + r.failed === 0 ? "target unavailable, see the banner above" : "needs the target does not provide";
  const skipped = r.ignored > 0 ? ` (${r.ignored} SKIPPED: ${why})` : "";
  console.log(`${r.label}: ${r.passed} passed, ${r.failed} failed${skipped}${note}`);
  for (const name of r.failures) console.log(`  FAILED: ${name}`);
}
const sum = (k: "passed" | "failed" | "ignored") => results.reduce((n, r) => n + r[k], 0);
const failedRuns = results.filter((r) => !r.ok).length;
// A run that failed outside any case (a file that does not load) still counts as a failure.
console.log(`${sum("passed")} passed, ${Math.max(sum("failed"), failedRuns)} failed, ${sum("ignored")} skipped`);
Deno.exit(failedRuns > 0 ? 1 : 0);
