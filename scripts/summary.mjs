// Prints CI's plain closing line ("N passed, N failed, N skipped") from
// vitest's JSON report, plus the conformance case count per adapter.
import { readFileSync } from "node:fs";

const report = JSON.parse(readFileSync(process.argv[2] ?? ".vitest-results.json", "utf8"));
const perAdapter = new Map();
for (const file of report.testResults ?? []) {
  for (const t of file.assertionResults ?? []) {
    const adapter = t.ancestorTitles?.[0];
    if (!["sqlite", "postgres", "mysql", "memory"].includes(adapter)) continue;
    const key = `${file.name.includes("/conformance/") ? "conformance" : "other"} ${adapter}`;
    const c = perAdapter.get(key) ?? { passed: 0, failed: 0, skipped: 0 };
    if (t.status === "passed") c.passed++;
    else if (t.status === "failed") c.failed++;
    else c.skipped++;
    perAdapter.set(key, c);
  }
}
// Skipped conformance cases are those needing what the target does not provide (their names say which).
for (const [key, c] of [...perAdapter].sort()) console.log(`${key}: ${c.passed} passed, ${c.failed} failed${c.skipped > 0 ? `, ${c.skipped} skipped` : ""}`);
// The failed cases by name, so that the tail of a CI log says which failed.
for (const file of report.testResults ?? []) {
  for (const t of file.assertionResults ?? []) if (t.status === "failed") console.log(`  FAILED: ${file.name.replace(process.cwd() + "/", "")} > ${[...(t.ancestorTitles ?? []), t.title].join(" > ")}`);
  if ((file.assertionResults ?? []).length === 0 && file.status === "failed") console.log(`  FAILED: ${file.name.replace(process.cwd() + "/", "")} (did not load: ${String(file.message ?? "").split("\n")[0]})`);
}
const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
console.log(`${report.numPassedTests} passed, ${report.numFailedTests} failed, ${skipped} skipped`);
process.exit(report.numFailedTests > 0 || !report.success ? 1 : 0);
