/**
 * `npm run test:mutations`: runs the default property suite (model-based
 * test, then concurrent schedules) once per mutation on every adapter it
 * applies to, prints a table, and exits non-zero if any mutation survives.
 *
 *   npm run test:mutations                              # everything
 *   npm run test:mutations -- --mutation lease-token-unchecked --adapter mysql
 *   DOCKET_PROPERTY_RUNS=500 npm run test:mutations     # more runs per property
 *   npm run test:mutations -- --repeat 20               # the gate: each mutation caught in >= 19 of 20 independent runs
 *   npm run test:mutations -- --mutation debounce-unguarded --schedules-only   # whether the schedules alone catch it
 *
 * With --repeat N, every mutation and adapter is run N times, each with
 * fresh seeds and a fresh database; the table gives the catch count out of
 * N and the spread of runs to the counterexample, and the script fails when
 * any count is below 95% of N.
 */
import { checkModel, checkSchedules, failureReport } from "../src/testing/property.ts";
import { MUTATIONS, type Mutation } from "../src/testing/kysely/mutations.ts";
import { dropPropertyDatabases, openPropertyEnv, propertyRuns } from "../test/support/property-env.ts";
import { DEFAULT_MODEL_RUNS, DEFAULT_SCHEDULE_RUNS } from "../test/support/property.ts";

/**
 * Schedule runs per mutation. With the race families (src/testing/schedule/scenarios.ts)
 * the lock mutations are caught in a median of 15–150 schedule runs and at most 553 over
 * 20 repeats of the whole table (docs/property-tests.md); 1,500 leaves a wide margin. A
 * caught mutation stops at its counterexample, so only survivors pay for it.
 */
const MUTATION_SCHEDULE_RUNS = 3 * DEFAULT_SCHEDULE_RUNS;
/**
 * Model runs per mutation: 4 × the suite's default. The dependency mutations need a parent with a waiting child
 * to end through a fast path: caught in a median of 26–35 runs and at most 194 over 20 repeats (stop 37), beyond
 * the default 150. A caught mutation stops at its counterexample.
 */
const MUTATION_MODEL_RUNS = 4 * DEFAULT_MODEL_RUNS;
import type { TargetName } from "../test/support/targets.ts";

const ADAPTERS: TargetName[] = ["sqlite", "postgres", "mysql"];

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1];
}

interface Row {
  mutation: string;
  adapter: string;
  verdict: "caught" | "SURVIVED" | "n/a" | "skipped" | "HUNG";
  by: string;
  runs: string;
  seconds: string;
  detail?: string;
}

async function runOne(mutation: Mutation, adapter: TargetName): Promise<Row> {
  const base = { mutation: mutation.id, adapter };
  const env = await openPropertyEnv(adapter, mutation);
  if (!env) return { ...base, verdict: "skipped", by: "server down", runs: "", seconds: "" };
  try {
    if (!mutation.appliesTo(env.capabilities)) return { ...base, verdict: "n/a", by: mutation.notApplicableBecause ?? "", runs: "", seconds: "" };
    const started = Date.now();
    // A schedules-only or concurrent-only mutation skips the model test (see Mutation); it then counts 0 model runs.
    const model = mutation.schedulesOnly || mutation.concurrentOnly || process.argv.includes("--schedules-only")
      ? { failed: false, numRuns: 0, errorInstance: null }
      : await checkModel(env, { numRuns: propertyRuns(MUTATION_MODEL_RUNS), endOnFailure: true });
    if (model.failed) {
      return { ...base, verdict: "caught", by: "model", runs: String(model.numRuns), seconds: secs(started), detail: firstViolation(model) };
    }
    const schedules = await checkSchedules(env, { numRuns: propertyRuns(MUTATION_SCHEDULE_RUNS), endOnFailure: true });
    if (schedules.failed) {
      const report = failureReport(schedules, (seed, path) => `DOCKET_PROPERTY_SEED=${seed} DOCKET_PROPERTY_PATH=${path} npm run test:mutations -- --mutation ${mutation.id} --adapter ${adapter}`);
      if (process.env.DOCKET_MUTATION_VERBOSE === "1") console.log(report);
      return { ...base, verdict: "caught", by: "schedules", runs: String(model.numRuns + schedules.numRuns), seconds: secs(started), detail: firstViolation(schedules) };
    }
    return { ...base, verdict: "SURVIVED", by: "", runs: String(model.numRuns + schedules.numRuns), seconds: secs(started) };
  } finally {
    await env.close();
  }
}

/** One mutation on one adapter may take this long; past it the row is HUNG (not caught) and the runner goes on with a fresh database. */
const RUN_LIMIT_MS = 600_000;

async function withinLimit(run: Promise<Row>, base: Pick<Row, "mutation" | "adapter">): Promise<Row> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hung = new Promise<Row>((resolve) => {
    timer = setTimeout(() => resolve({ ...base, verdict: "HUNG", by: "", runs: "", seconds: String(RUN_LIMIT_MS / 1000) }), RUN_LIMIT_MS);
  });
  try {
    return await Promise.race([run, hung]);
  } finally {
    clearTimeout(timer);
  }
}

function secs(started: number): string {
  return ((Date.now() - started) / 1000).toFixed(1);
}

function firstViolation(details: { errorInstance: unknown }): string {
  const e = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
  const line = e.split("\n").find((l) => /^\s*- /.test(l) || /disagrees|returned/.test(l)) ?? e.split("\n")[0] ?? "";
  return line.trim().replace(/^- /, "").slice(0, 160);
}

async function main(): Promise<void> {
  const only = arg("mutation");
  const adapters = arg("adapter") ? [arg("adapter") as TargetName] : ADAPTERS;
  const mutations = only ? MUTATIONS.filter((m) => m.id === only) : MUTATIONS;
  if (mutations.length === 0) throw new Error(`unknown mutation ${only}; known: ${MUTATIONS.map((m) => m.id).join(", ")}`);
  // Replay of one mutation's failing run.
  const seed = process.env.DOCKET_PROPERTY_SEED;
  const path = process.env.DOCKET_PROPERTY_PATH;
  if (seed && mutations.length === 1 && adapters.length === 1) {
    const env = await openPropertyEnv(adapters[0]!, mutations[0]!);
    if (!env) throw new Error("server down");
    try {
      const d = await checkSchedules(env, { numRuns: propertyRuns(DEFAULT_SCHEDULE_RUNS), seed: Number(seed), ...(path ? { path } : {}) });
      console.log(failureReport(d, () => "(this command)") ?? "replay passed: the counterexample did not reproduce");
      process.exitCode = d.failed ? 0 : 1;
    } finally {
      await env.close();
      await dropPropertyDatabases(adapters);
    }
    return;
  }
  const repeat = Number(arg("repeat") ?? "1");
  if (!Number.isInteger(repeat) || repeat < 1) throw new Error(`--repeat must be a positive integer, got ${arg("repeat")}`);
  const rows: Row[] = [];
  const started = Date.now();
  try {
    for (let round = 1; round <= repeat; round++) {
      for (const m of mutations) {
        for (const a of adapters) {
          const row = await withinLimit(runOne(m, a), { mutation: m.id, adapter: a });
          rows.push(row);
          const at = repeat > 1 ? `[${round}/${repeat}] ` : "";
          console.log(`${at}${row.verdict.padEnd(8)} ${m.id} on ${a}${row.by ? ` (${row.by}${row.runs ? `, ${row.runs} runs, ${row.seconds} s` : ""})` : ""}${row.detail ? `: ${row.detail}` : ""}`);
        }
      }
    }
  } finally {
    await dropPropertyDatabases(adapters);
  }
  if (repeat === 1) printTable(rows);
  else printCounts(rows, repeat);
  const na = rows.filter((r) => r.verdict === "n/a");
  if (na.length > 0) {
    console.log("\nNot applicable:");
    for (const m of new Set(na.map((r) => r.mutation))) console.log(`- ${m} on ${[...new Set(na.filter((r) => r.mutation === m).map((r) => r.adapter))].join(", ")}: ${MUTATIONS.find((x) => x.id === m)?.notApplicableBecause}`);
  }
  const schedulesOnly = mutations.filter((m) => m.schedulesOnly);
  if (schedulesOnly.length > 0) {
    console.log("\nSchedules only (model test skipped):");
    for (const m of schedulesOnly) console.log(`- ${m.id}: ${m.schedulesOnly}`);
  }
  const concurrentOnly = mutations.filter((m) => m.concurrentOnly);
  if (concurrentOnly.length > 0) {
    console.log("\nConcurrent only (the model test, one worker in sequence, cannot observe the removed protection):");
    for (const m of concurrentOnly) console.log(`- ${m.id}: ${m.concurrentOnly}`);
  }
  const survived = rows.filter((r) => r.verdict === "SURVIVED" || r.verdict === "HUNG");
  const skipped = rows.filter((r) => r.verdict === "skipped");
  console.log(`\n${rows.filter((r) => r.verdict === "caught").length} caught, ${survived.length} survived, ${na.length} n/a, ${skipped.length} skipped in ${secs(started)} s`);
  const required = Math.ceil(0.95 * repeat);
  const short = groups(rows).filter((g) => g.applicable && g.caught < required);
  if (repeat > 1 && short.length > 0) console.log(`below ${required}/${repeat}: ${short.map((g) => `${g.mutation} on ${g.adapter} (${g.caught})`).join(", ")}`);
  if (short.length > 0 || (skipped.length > 0 && process.env.DOCKET_REQUIRE_ALL_ADAPTERS === "1")) process.exitCode = 1;
}

function printTable(rows: Row[]): void {
  const header = ["mutation", "adapter", "verdict", "caught by", "runs to counterexample", "seconds"];
  const table = rows.map((r) => [r.mutation, r.adapter, r.verdict, r.verdict === "n/a" ? "" : r.by, r.runs, r.seconds]);
  console.log(`\n| ${header.join(" | ")} |\n|${header.map(() => "---").join("|")}|`);
  for (const t of table) console.log(`| ${t.join(" | ")} |`);
}

interface Group {
  mutation: string;
  adapter: string;
  applicable: boolean;
  caught: number;
  rows: Row[];
}

/** Rows grouped by mutation and adapter, in first-seen order. */
function groups(rows: Row[]): Group[] {
  const out = new Map<string, Group>();
  for (const r of rows) {
    const k = `${r.mutation} ${r.adapter}`;
    const g = out.get(k) ?? { mutation: r.mutation, adapter: r.adapter, applicable: r.verdict !== "n/a" && r.verdict !== "skipped", caught: 0, rows: [] };
    g.rows.push(r);
    if (r.verdict === "caught") g.caught++;
    out.set(k, g);
  }
  return [...out.values()];
}

function printCounts(rows: Row[], repeat: number): void {
  const header = ["mutation", "adapter", `caught of ${repeat}`, "caught by", "runs to counterexample (min / median / max)", "seconds (median)"];
  console.log(`\n| ${header.join(" | ")} |\n|${header.map(() => "---").join("|")}|`);
  for (const g of groups(rows)) {
    if (!g.applicable) {
      console.log(`| ${g.mutation} | ${g.adapter} | ${g.rows[0]!.verdict} | | | |`);
      continue;
    }
    const caught = g.rows.filter((r) => r.verdict === "caught");
    const runs = caught.map((r) => Number(r.runs)).sort((a, b) => a - b);
    const seconds = g.rows.map((r) => Number(r.seconds)).sort((a, b) => a - b);
    const by = [...new Set(caught.map((r) => r.by))].join(", ");
    const spread = runs.length === 0 ? "" : `${runs[0]} / ${median(runs)} / ${runs[runs.length - 1]}`;
    console.log(`| ${g.mutation} | ${g.adapter} | ${g.caught}/${repeat} | ${by} | ${spread} | ${median(seconds)} |`);
  }
}

function median(xs: number[]): number {
  return xs.length === 0 ? 0 : xs[Math.floor((xs.length - 1) / 2)]!;
}

await main();
