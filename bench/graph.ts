/**
 * Dependency graph benchmark (issue 26 target): on each adapter, the time to
 * store a graph of N jobs in ONE enqueueMany with refs, against N independent
 * jobs in one enqueueMany, measured in the same run on fresh stores; then a
 * worker drains the graph and the independent jobs, for the drain rates side
 * by side (each job released exactly once is checked: every job ran once,
 * none before its parents).
 *
 *   npx tsx bench/graph.ts [--systems sqlite,postgres,mysql] [--jobs 1000] [--fan-in 5] [--runs 3]
 *
 * Graph shape: layers of 50 jobs; each job of a layer after the first waits
 * for `fan-in` jobs of the layer before (edges ≈ N × fan-in), so up to 50
 * jobs are runnable at once.
 * Store ratio = graph store time / independent store time (target ≤ 2),
 * each timed after one untimed store of the same shape into the same tables
 * (queue "warm", never drained).
 * Drain: one worker, concurrency 10, no-op handlers; jobs/s for each shape.
 */
import { Docket, type EnqueueItem } from "../src/index.ts";
import { openDatabase, type AdapterName } from "./databases.ts";

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!);
const systems = (args.get("systems") ?? "sqlite,postgres,mysql").split(",") as AdapterName[];
const n = Number(args.get("jobs") ?? 1000);
const fanIn = Number(args.get("fan-in") ?? 5);
const runs = Number(args.get("runs") ?? 3);

type Tasks = { node: { i: number } };

/** Layers of WIDTH jobs: a job of layer L >= 1 waits for `fanIn` jobs of layer L - 1 (distinct, spread by its place). */
const WIDTH = 50;
function parentsOf(i: number): number[] {
  const layer = Math.floor(i / WIDTH);
  if (layer === 0) return [];
  const k = Math.min(fanIn, WIDTH);
  return Array.from({ length: k }, (_, j) => (layer - 1) * WIDTH + ((i + Math.floor((j * WIDTH) / k)) % WIDTH));
}

function graphItems(): EnqueueItem<Tasks>[] {
  return Array.from({ length: n }, (_, i) => ({
    task: "node" as const,
    payload: { i },
    ref: `n${i}`,
    ...(parentsOf(i).length === 0 ? {} : { options: { after: parentsOf(i).map((p) => ({ ref: `n${p}` })) } }),
  }));
}
const plainItems = (): EnqueueItem<Tasks>[] => Array.from({ length: n }, (_, i) => ({ task: "node" as const, payload: { i } }));

async function drain(docket: Docket<Tasks>, ids: number[], graph: boolean): Promise<number> {
  const ranAt = new Map<number, number>();
  let order = 0;
  const byIndex = new Map<number, number>();
  const w = docket.worker({ concurrency: 10, pollMs: 50, logger: null, handlers: { node: ({ i }) => void (ranAt.has(i) ? ranAt.set(i, -1) : ranAt.set(i, order++)) } });
  const started = performance.now();
  await w.start();
  while (ranAt.size < n) await new Promise((r) => setTimeout(r, 5));
  await docket.waitFor(ids[ids.length - 1]!, { timeoutMs: 120_000, pollMs: 5 });
  const ms = performance.now() - started;
  await w.stop();
  for (const [i, at] of ranAt) byIndex.set(i, at);
  if ([...ranAt.values()].some((v) => v < 0)) throw new Error("a job ran twice");
  if (graph) for (let i = 1; i < n; i++) for (const p of parentsOf(i)) if (byIndex.get(p)! > byIndex.get(i)!) throw new Error(`job ${i} ran before its parent ${p}`);
  return (n / ms) * 1000;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

console.log(`graph of ${n} jobs, fan-in up to ${fanIn} (${graphItems().reduce((s, it) => s + ((it.options?.after?.length as number | undefined) ?? 0), 0)} edges), ${runs} runs, median`);
for (const system of systems) {
  const db = await openDatabase(system);
  const rows: { plain: number; graph: number; plainRate: number; graphRate: number }[] = [];
  try {
    for (let r = 0; r < runs; r++) {
      const row = { plain: 0, graph: 0, plainRate: 0, graphRate: 0 };
      for (const shape of ["plain", "graph"] as const) {
        const docket = new Docket<Tasks>({ adapter: await db.open(r * 2 + (shape === "graph" ? 1 : 0)) });
        await docket.migrate();
        await docket.list({ limit: 1 }); // the connection opened before the clock starts
        const items = shape === "graph" ? graphItems() : plainItems();
        // One untimed store of the same shape first, into a queue no worker here drains: the time measured is the
        // steady state (tables that exist and have grown, code compiled), not a fresh table's or a first call's.
        await docket.enqueueMany(items.map((it) => ({ ...it, options: { ...it.options, queue: "warm" } })));
        const t0 = performance.now();
        const stored = await docket.enqueueMany(items);
        row[shape] = performance.now() - t0;
        row[shape === "graph" ? "graphRate" : "plainRate"] = await drain(docket, stored.map((j) => j.id), shape === "graph");
        await docket.close();
      }
      rows.push(row);
    }
  } finally {
    await db.dispose();
  }
  const plain = median(rows.map((r) => r.plain));
  const graph = median(rows.map((r) => r.graph));
  const ratio = median(rows.map((r) => r.graph / r.plain));
  console.log(
    `${system.padEnd(8)} store: independent ${plain.toFixed(1)} ms, graph ${graph.toFixed(1)} ms, ratio ${ratio.toFixed(2)} (target ≤ 2)` +
      ` | drain: independent ${median(rows.map((r) => r.plainRate)).toFixed(0)} jobs/s, graph ${median(rows.map((r) => r.graphRate)).toFixed(0)} jobs/s`,
  );
}
