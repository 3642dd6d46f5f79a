/**
 * Running the documentation's TypeScript blocks (test/docs/run-blocks.test.ts).
 *
 * Each ```ts / ```typescript block of README.md and docs/*.md runs in a
 * fresh temporary directory, its imports of docket's package names rewritten
 * to the sources (as code-blocks.ts does for the type check):
 *
 * - on Node, through block-runner.ts (`node --import tsx`), which defines
 *   what the fragments use without defining it, runs the block, then stops
 *   the workers and schedulers it started and closes what it opened;
 * - on Deno (a block that imports `@docket/docket…`), with `deno run` and
 *   the repository's deno.json, as it is: such a block must end by itself.
 *
 * The database is SQLite (a file in the directory) unless the block imports
 * docket/postgres or pg (PostgreSQL), or docket/mysql or mysql2 (MySQL /
 * MariaDB), or a marker says otherwise; for those, a database of its own on
 * DOCKET_PG_URL / DOCKET_MYSQL_URL, created before and dropped after.
 *
 * A block is steered by an HTML comment on the line before its fence (blank
 * lines between are allowed): `<!-- run: … -->`, directives separated by
 * `;`:
 *
 * - `skip — <reason>` (or `skip: <reason>`): not run; the reason is required
 *   and printed;
 * - `start-only` or `start-only <N> ms`: the block need not settle (it serves
 *   or waits for a signal forever): it must start and run N ms (default
 *   2000) without throwing;
 * - `sqlite`, `postgres`, `mysql`: the prelude's database.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TS_LANGS, entryPoints, rewriteImports } from "./code-blocks.ts";
import { ROOT, codeBlocks, docFiles, readDoc } from "./markdown.ts";
import { MYSQL_URL, PG_URL, REQUIRE_ALL, dropPgDatabase } from "../support/targets.ts";

/** Each block's time limit, prelude and postlude included. */
export const BLOCK_TIMEOUT_MS = 20_000;
/** A start-only block's run, unless its marker gives one. */
const START_ONLY_MS = 2_000;
/** What block-runner.ts prints last when the block ran and everything it started stopped. */
const RUNNER_DONE = "docket-block-runner: done";

export type Target = "sqlite" | "postgres" | "mysql";

export interface PlannedBlock {
  /** `file:line`, the line of the block's first code line. */
  where: string;
  code: string;
  runtime: "node" | "deno";
  target: Target;
  /** Set for a start-only block: how long it must run without throwing. */
  startOnlyMs: number | null;
  /** Set when the block is not run: why. */
  skip: string | null;
  /** Set when the block's marker is malformed (the block then fails). */
  invalid: string | null;
}

export interface BlockResult {
  block: PlannedBlock;
  outcome: "ran" | "skipped" | "failed";
  /** Why it was skipped, or how it failed (with the output's tail). */
  detail: string;
  /** The block's output (stdout and stderr). */
  output: string;
  ms: number;
}

const IMPORTS = (names: string) => new RegExp(`\\b(?:from|import)\\s*\\(?\\s*["'](?:${names})(?:/[^"']*)?["']`);

/** Every TypeScript block of the documentation, with how it is to be run. */
export function plannedBlocks(): PlannedBlock[] {
  const planned: PlannedBlock[] = [];
  for (const file of docFiles()) {
    for (const block of codeBlocks(readDoc(file))) {
      if (TS_LANGS.has(block.lang)) planned.push(planBlock(`${file}:${block.line}`, block.code, block.comment));
    }
  }
  return planned;
}

/** How the block `code` at `where` is run, given the HTML comment before its fence (CodeBlock.comment). */
export function planBlock(where: string, code: string, comment: string | null): PlannedBlock {
  const runtime = IMPORTS("@docket/docket").test(code) ? "deno" : "node";
  let target: Target = "sqlite";
  if (IMPORTS("docket/postgres|pg").test(code)) target = "postgres";
  else if (IMPORTS("docket/mysql|mysql2").test(code)) target = "mysql";
  const plan: PlannedBlock = { where, code, runtime, target, startOnlyMs: null, skip: null, invalid: null };
  const marker = comment === null ? null : /^run\s*:\s*([\s\S]*)$/.exec(comment);
  if (marker) applyMarker(plan, marker[1]!.trim());
  return plan;
}

function applyMarker(plan: PlannedBlock, text: string): void {
  const skip = /^skip\b\s*(?:[—–:-]\s*)?([\s\S]*)$/.exec(text);
  if (skip) {
    plan.skip = skip[1]!.trim();
    if (plan.skip === "") plan.invalid = "`<!-- run: skip -->` needs a reason: `<!-- run: skip — needs … -->`";
    return;
  }
  for (const directive of text.split(";").map((d) => d.trim())) {
    const startOnly = /^start-only(?:\s+(\d+)\s*ms)?$/.exec(directive);
    if (startOnly) plan.startOnlyMs = startOnly[1] === undefined ? START_ONLY_MS : Number(startOnly[1]);
    else if (directive === "sqlite" || directive === "postgres" || directive === "mysql") plan.target = directive;
    else plan.invalid = `unknown run directive ${JSON.stringify(directive)} (expected skip — <reason>, start-only [N ms], sqlite, postgres or mysql)`;
  }
  if (plan.startOnlyMs !== null && plan.startOnlyMs >= BLOCK_TIMEOUT_MS - 5_000) plan.invalid = `start-only ${plan.startOnlyMs} ms leaves no room in the ${BLOCK_TIMEOUT_MS} ms limit`;
}

let databases = 0;
const runId = `${process.pid.toString(36)}${Date.now().toString(36)}`;

/** The URL with its database path replaced. */
function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** A fresh database for one block on PostgreSQL or MySQL: its URL and how to drop it; null with the reason when the server does not answer. */
async function freshDatabase(target: "postgres" | "mysql"): Promise<{ url: string; drop: () => Promise<void> } | { unavailable: string }> {
  const database = `docket_block_${runId}_${databases++}`;
  try {
    if (target === "postgres") {
      const pg = (await import("pg")).default;
      const root = new pg.Client({ connectionString: PG_URL });
      await root.connect();
      await root.query(`CREATE DATABASE ${database}`);
      await root.end();
      return { url: withDatabase(PG_URL, database), drop: () => dropPgDatabase(PG_URL, database) };
    }
    const mysql = (await import("mysql2/promise")).default;
    const root = await mysql.createConnection({ uri: MYSQL_URL });
    await root.query(`CREATE DATABASE ${database}`);
    await root.end();
    const drop = async () => {
      const c = await mysql.createConnection({ uri: MYSQL_URL });
      await c.query(`DROP DATABASE IF EXISTS ${database}`);
      await c.end();
    };
    return { url: withDatabase(MYSQL_URL, database), drop };
  } catch (error) {
    const reason = `${target === "postgres" ? "PostgreSQL" : "MySQL"} unreachable (${(error as Error).message})`;
    if (REQUIRE_ALL) throw new Error(`DOCKET_REQUIRE_ALL_ADAPTERS=1 but ${reason}`, { cause: error });
    return { unavailable: reason };
  }
}

/** Runs `command` in `cwd`, killed (with its children) after `timeoutMs`; its exit code and output, interleaved. */
function runProcess(command: string, args: string[], cwd: string, env: Record<string, string>, timeoutMs: number): Promise<{ code: number | null; output: string; timedOut: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let output = "";
    let timedOut = false;
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        child.kill("SIGKILL");
      }
    }, timeoutMs);
    child.on("error", (error) => (clearTimeout(timer), reject(error)));
    child.on("close", (code) => (clearTimeout(timer), resolve({ code, output, timedOut })));
  });
}

const tail = (output: string) => output.trim().split("\n").slice(-25).join("\n");

/** Runs one block in a fresh directory (removed afterwards), on a fresh database when it needs a server. */
export async function runBlock(block: PlannedBlock): Promise<BlockResult> {
  const started = Date.now();
  let output = "";
  const result = (outcome: BlockResult["outcome"], detail: string): BlockResult => ({ block, outcome, detail, output, ms: Date.now() - started });
  if (block.invalid) return result("failed", block.invalid);
  if (block.skip !== null) return result("skipped", block.skip);
  const dir = mkdtempSync(join(tmpdir(), "docket-block-"));
  let drop: (() => Promise<void>) | null = null;
  try {
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "docs-block", private: true, type: "module" }));
    symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
    const code = rewriteImports(block.code, entryPoints(), (source) => join(ROOT, source));
    writeFileSync(join(dir, "block.ts"), `${code}\nexport {};\n`);
    if (block.runtime === "deno") {
      const deno = join(ROOT, "node_modules/.bin/deno");
      const flags = ["--allow-read", "--allow-write", "--allow-env", "--allow-net", "--allow-sys", "--allow-ffi"];
      const run = await runProcess(deno, ["run", ...flags, "--config", join(ROOT, "deno.json"), "block.ts"], dir, { NO_COLOR: "1" }, BLOCK_TIMEOUT_MS);
      output = run.output;
      if (run.timedOut) return result("failed", `did not end within ${BLOCK_TIMEOUT_MS} ms (a Deno block must end by itself)\n${tail(run.output)}`);
      if (run.code !== 0) return result("failed", `deno exited with ${run.code}\n${tail(run.output)}`);
      return result("ran", "");
    }
    const env: Record<string, string> = { DOCKET_BLOCK_TARGET: block.target };
    if (block.startOnlyMs !== null) env.DOCKET_BLOCK_START_ONLY_MS = String(block.startOnlyMs);
    if (block.target !== "sqlite") {
      const fresh = await freshDatabase(block.target);
      if ("unavailable" in fresh) return result("skipped", fresh.unavailable);
      drop = fresh.drop;
      env.DOCKET_BLOCK_URL = fresh.url;
    }
    const runner = join(ROOT, "test/docs/block-runner.ts");
    const run = await runProcess(process.execPath, ["--import", "tsx", runner, join(dir, "block.ts")], dir, env, BLOCK_TIMEOUT_MS);
    output = run.output;
    if (run.timedOut) {
      const hint = block.startOnlyMs === null ? " (a block that never settles takes `<!-- run: start-only -->`)" : "";
      return result("failed", `did not end within ${BLOCK_TIMEOUT_MS} ms${hint}\n${tail(run.output)}`);
    }
    if (run.code !== 0 || run.output.trim().split("\n").at(-1) !== RUNNER_DONE) return result("failed", `exited with ${run.code}\n${tail(run.output)}`);
    return result("ran", "");
  } finally {
    if (drop) await drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs `blocks`, at most `parallel` at a time; results in the blocks' order. */
export async function runBlocks(blocks: PlannedBlock[], parallel: number): Promise<BlockResult[]> {
  const results: BlockResult[] = new Array(blocks.length);
  let next = 0;
  const lane = async () => {
    while (next < blocks.length) {
      const i = next++;
      results[i] = await runBlock(blocks[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, blocks.length) }, lane));
  return results;
}

/** `docs code blocks: N run, M skipped (where: reason; …)`. */
export function summary(results: BlockResult[]): string {
  const ran = results.filter((r) => r.outcome === "ran").length;
  const skipped = results.filter((r) => r.outcome === "skipped");
  const failed = results.filter((r) => r.outcome === "failed").length;
  const reasons = skipped.length === 0 ? "" : ` (${skipped.map((r) => `${r.block.where}: ${r.detail}`).join("; ")})`;
  return `docs code blocks: ${ran} run, ${skipped.length} skipped${reasons}${failed > 0 ? `, ${failed} FAILED` : ""}`;
}

/** The fence languages of shell blocks. */
const SHELL_LANGS = new Set(["sh", "bash", "shell", "console"]);
/** npm's own commands the documentation uses (anything else must be a script of package.json, run with `npm run`). */
const NPM_COMMANDS = new Set(["ci", "i", "install", "pack", "test"]);

/**
 * The commands of the documentation's shell blocks that name something of
 * this repository, checked without running them: `npm run <script>` (and
 * `npm test`) names a script of package.json, `npm <command>` one of
 * NPM_COMMANDS, and a path argument of `npx tsx`, `deno run` or `deno test`
 * that has a directory in it names a file of the repository. In a block with
 * `$ ` prompts only the prompted lines are commands (the rest is output).
 * Returns how many commands were checked and what is wrong.
 */
export function checkShellBlocks(): { checked: number; problems: string[] } {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
  const problems: string[] = [];
  let checked = 0;
  for (const file of docFiles()) {
    for (const block of codeBlocks(readDoc(file))) {
      if (!SHELL_LANGS.has(block.lang)) continue;
      const lines = block.code.split("\n");
      const prompted = lines.some((l) => l.startsWith("$ "));
      lines.forEach((text, i) => {
        if (prompted && !text.startsWith("$ ")) return;
        const where = `${file}:${block.line + i}`;
        const line = text.replace(/^\$ /, "").replace(/(^|\s)#.*$/, "");
        for (const command of line.split(/&&|\|\||[;|]/)) {
          const words = command.trim().split(/\s+/).filter((w) => w !== "");
          if (words[0] === "npm") {
            checked++;
            if (words[1] === "run") {
              if (!words[2] || !(words[2] in pkg.scripts)) problems.push(`${where}: npm run ${words[2] ?? ""}: no such script in package.json`);
            } else if (!NPM_COMMANDS.has(words[1] ?? "")) {
              problems.push(`${where}: npm ${words[1] ?? ""}: not an npm command the docs are known to use (${[...NPM_COMMANDS].join(", ")})`);
            } else if (words[1] === "test" && !("test" in pkg.scripts)) {
              problems.push(`${where}: npm test: package.json has no test script`);
            }
          } else if ((words[0] === "npx" && words[1] === "tsx") || (words[0] === "deno" && (words[1] === "run" || words[1] === "test"))) {
            checked++;
            for (const arg of words.slice(2)) {
              if (!arg.startsWith("-") && arg.includes("/") && !existsSync(join(ROOT, arg))) problems.push(`${where}: ${words.slice(0, 2).join(" ")} ${arg}: no such file`);
            }
          }
        }
      });
    }
  }
  return { checked, problems };
}
