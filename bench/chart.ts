/**
 * Renders a drain benchmark's JSON (bench/drain.ts --json) as an SVG bar
 * chart: per scenario, the median jobs/s of every system.
 *
 *   npx tsx bench/chart.ts bench/results/drain.json docs/bench-drain.svg
 */
import { readFileSync, writeFileSync } from "node:fs";

interface Row {
  system: string;
  scenario: string;
  jobsPerSec: number;
}
const [input, output] = process.argv.slice(2);
if (!input || !output) throw new Error("usage: chart.ts <drain.json> <out.svg>");
const data = JSON.parse(readFileSync(input, "utf8")) as { jobs: number; runs: number; scenarios: string[]; results: Row[] };
const systems = [...new Set(data.results.map((r) => r.system))];
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const value = (system: string, scenario: string) => median(data.results.filter((r) => r.system === system && r.scenario === scenario).map((r) => r.jobsPerSec));
const max = Math.max(...data.scenarios.flatMap((s) => systems.map((y) => value(y, s))));
const COLORS: Record<string, string> = {
  sqlite: "#4c78a8",
  postgres: "#1f4e79",
  mysql: "#72b7b2",
  "graphile-fast": "#e45756",
  "graphile-defaults": "#f2a19f",
  "pgboss-tuned": "#b279a2",
  "pgboss-defaults": "#d6b3cc",
  "raw-ceiling": "#9d9d9d",
};
const label = (s: string) => (["sqlite", "postgres", "mysql"].includes(s) ? `docket ${s}` : s);
const barH = 16;
const gap = 4;
const left = 150;
const width = 760;
const plotW = width - left - 90;
const groupH = systems.length * (barH + gap) + 28;
const height = 50 + data.scenarios.length * groupH;
const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;");
let y = 44;
const parts: string[] = [];
parts.push(`<text x="${left}" y="22" font-size="15" font-weight="bold">Drain of ${data.jobs.toLocaleString("en")} no-op jobs, jobs/s (median of ${data.runs})</text>`);
for (const scenario of data.scenarios) {
  const m = /^c(\d+)x(\d+)$/.exec(scenario);
  const title = m ? `concurrency ${m[1]}, ${m[2]} process${m[2] === "1" ? "" : "es"}` : scenario;
  parts.push(`<text x="10" y="${y + 12}" font-size="13" font-weight="bold">${esc(title)}</text>`);
  y += 20;
  for (const system of systems) {
    const v = value(system, scenario);
    const w = Math.max(1, (v / max) * plotW);
    parts.push(`<text x="${left - 6}" y="${y + barH - 4}" font-size="12" text-anchor="end">${esc(label(system))}</text>`);
    parts.push(`<rect x="${left}" y="${y}" width="${w.toFixed(1)}" height="${barH}" fill="${COLORS[system] ?? "#888"}"/>`);
    parts.push(`<text x="${(left + w + 5).toFixed(1)}" y="${y + barH - 4}" font-size="12">${Math.round(v).toLocaleString("en")}</text>`);
    y += barH + gap;
  }
  y += 8;
}
writeFileSync(
  output,
  `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">\n<rect width="100%" height="100%" fill="white"/>\n${parts.join("\n")}\n</svg>\n`,
);
console.log(`wrote ${output}`);
