import { sql } from "kysely";
import type { ClaimParams, SettleAndHandOffParams, SettleItem, SettledJob } from "../../core/adapter.ts";
import type { JobRecord } from "../../core/job.ts";
import { byClaimOrder } from "../../core/claim-order.ts";
import type { StoreContext } from "./context.ts";
import type { Capabilities } from "./engine.ts";
import { CAPS_MEMORY_MS, claimSet, countedControl, type ClaimMemory } from "./claim-parts.ts";
import { compiledOnce, Slot } from "./compiled.ts";
import { guard } from "./guard.ts";
import { labelled } from "./labels.ts";
import { settle, slottedCompletionUpdate } from "./outcomes.ts";
import { inClaimOrder, rowToRecord, rowToSettled, type JobRow } from "./row.ts";

/** The column that tells a hand-off statement's claimed rows from its settled ones. */
const HANDED = "docket_handed";

/**
 * See DocketAdapter.settleAndHandOff, for an engine that can do it in ONE
 * statement (`handsOffInOneStatement`: PostgreSQL). Hands off when a cap
 * was met lately (the store's claim memory) and the batch is the common
 * one: completions of unkeyed jobs under one lease token, at one time,
 * with one result. Otherwise writes the outcomes as `settle` does and
 * hands off nothing.
 */
export async function settleAndHandOff(
  ctx: StoreContext,
  memory: ClaimMemory,
  params: SettleAndHandOffParams,
): Promise<{ settled: (SettledJob | null)[]; claimed: JobRecord[] }> {
  const { items, handOff } = params;
  if (!handsOff(memory, params)) return { settled: await settle(ctx, params), claimed: [] };
  const first = items[0] as Extract<SettleItem, { kind: "complete" }>;
  const values = {
    ids: [...new Set(items.map((i) => i.id))],
    token: first.leaseToken,
    now: first.now,
    result: first.result ?? null,
    handLimit: handOff.limit,
    claimNow: handOff.now,
    leaseToken: handOff.leaseToken,
    leaseExpiresAt: handOff.leaseExpiresAt,
    worker: handOff.worker ?? null,
  };
  const key = JSON.stringify(["hand-off", handOff.queues, handOff.tasks ?? null]);
  const build = () => handOffStatement(ctx, handOff.queues, handOff.tasks);
  // Named where the engine prepares, unlike the claim and the completion (PLANNED_EACH_RUN): a hand-off runs only
  // while a cap holds ready jobs back, so its plan is not made on an empty table; planned at each run, it cost
  // capped drains 20-30% (bench/results/session59.txt).
  const compiled = compiledOnce(ctx.statements, key, build, values, ctx.engine.prepare);
  const rows = (await ctx.engine.writeStatement(ctx.db, (db) => db.executeQuery(compiled))).rows as (JobRow & { [HANDED]: boolean })[];
  const settled = new Map<number, SettledJob>();
  const claimed: JobRecord[] = [];
  for (const { [HANDED]: handed, ...row } of rows) {
    if (handed) claimed.push(rowToRecord(row as JobRow));
    else settled.set(Number(row.id), rowToSettled(row as JobRow));
  }
  if (claimed.length > 0) memory.capsSeenAt = handOff.now;
  // A completion the statement missed (a lost lease, or a job with children to settle) is written as `settle` writes it.
  const missed = items.filter((i) => !settled.has(i.id));
  if (missed.length > 0) (await settle(ctx, { items: missed })).forEach((s, k) => s && settled.set(missed[k]!.id, s));
  return { settled: items.map((i) => settled.get(i.id) ?? null), claimed: claimed.sort(byClaimOrder) };
}

/** Whether an engine hands off in one statement (PostgreSQL): a store offers `settleAndHandOff` only then. */
export function handsOffInOneStatement(caps: Capabilities): boolean {
  return caps.arrays && caps.returning && caps.claimStatement;
}

/** Whether this batch is handed off (see `settleAndHandOff`; the store offers it only where `handsOffInOneStatement`). */
function handsOff(memory: ClaimMemory, { items, handOff }: SettleAndHandOffParams): boolean {
  if (handOff.limit <= 0 || handOff.queues.length === 0 || handOff.tasks?.length === 0) return false;
  if (handOff.now - memory.capsSeenAt >= CAPS_MEMORY_MS || items.length === 0) return false;
  const first = items[0]!;
  if (first.kind !== "complete") return false;
  const ids = new Set<number>();
  for (const item of items) {
    if (item.kind !== "complete" || item.concurrencyKey !== null || item.leaseToken !== first.leaseToken || item.now !== first.now) return false;
    if ((item.result ?? null) !== (first.result ?? null) || ids.has(item.id)) return false;
    ids.add(item.id);
  }
  return true;
}

/**
 * The hand-off as one statement, compiled once per queue and task set (its
 * values are slots): `done` completes the batch (fenced by its token, as
 * `settle` does); `ctl` share-locks the control rows of the unpaused capped
 * queues among the completed jobs' (so a pause or cap change waits, and
 * this statement reads the newest setting), with how many slots the batch
 * frees in each; `picked` takes per queue the first ready jobs in claim
 * order, not of a capped or rate-limited task nor rate-keyed (a queue with
 * a rate limit, or that holds rate-keyed jobs, or is fair, is not handed off: its claims serve its keys in turn), at most the freed slots and never past the
 * cap: `cap + freed − running`, running counted in the statement's snapshot
 * where the completed jobs still run; at most `handLimit` in all. `claimed`
 * claims them. Returns every completed and claimed row, told apart by HANDED.
 */
function handOffStatement(ctx: StoreContext, queues: readonly string[], tasks: readonly string[] | undefined) {
  const { tables, engine } = ctx;
  const db = ctx.db;
  const done = labelled(slottedCompletionUpdate(ctx).returningAll(), "complete");
  const slotted = {
    queues,
    tasks,
    limit: 0,
    now: new Slot("claimNow"),
    leaseToken: new Slot("leaseToken"),
    leaseExpiresAt: new Slot("leaseExpiresAt"),
    worker: new Slot("worker"),
  } as unknown as ClaimParams;
  // deno-lint-ignore no-explicit-any
  const d = db as any;
  const running = d
    .selectFrom(`${tables.jobs} as r`)
    .select(sql`count(*)`.as("n"))
    .where("r.queue", "=", sql.ref("ctl.name"))
    .where("r.state", "=", sql.lit("running"));
  // deno-lint-ignore no-explicit-any
  let next: any = guard(d.selectFrom(tables.jobs).select(["id", "priority", "run_at"]), "claim", { now: 0 })
    .where("queue", "=", sql.ref("ctl.name"))
    .where("task", "not in", d.selectFrom("ctl_t").select("name").where(countedControl))
    .where("rate_key", "is", null);
  if (tasks !== undefined) next = next.where("task", "in", [...tasks]);
  next = inClaimOrder(next)
    .limit(sql<number>`least(${sql.ref("ctl.freed")}, greatest(0, ${sql.ref("ctl.max_running")} + ${sql.ref("ctl.freed")} - (${running})))`)
    .forUpdate()
    .skipLocked();
  return d
    .with("done", () => done)
    .with(
      (cte: any) => cte("ctl_t").materialized(),
      (w: any) => {
        let q = w.selectFrom(tables.tasks).select(["name", "max_running", "rate_limit"]);
        if (tasks !== undefined) q = q.where("name", "in", [...tasks]);
        return engine.shareLock(q);
      },
    )
    .with(
      (cte: any) => cte("ctl").materialized(),
      (w: any) =>
        engine.shareLock(
          w
            .selectFrom(tables.queues)
            .select(["name", "max_running"])
            .select((eb: any) => eb.selectFrom("done").select(sql`count(*)`.as("n")).where("done.queue", "=", sql.ref(`${tables.queues}.name`)).as("freed"))
            .where("name", "in", [...queues])
            .where("name", "in", w.selectFrom("done").select("queue"))
            .where("max_running", "is not", null)
            .where("rate_limit", "is", null)
            .where("keyed_rate", "=", 0)
            .where("fair", "=", 0)
            .where("paused", "=", 0),
        ),
    )
    .with(
      (cte: any) => cte("picked").materialized(),
      (w: any) => inClaimOrder(w.selectFrom("ctl").innerJoinLateral(next.as("x"), (join: any) => join.onTrue()).select(["x.id", "x.priority", "x.run_at"])).limit(new Slot("handLimit")),
    )
    .with("claimed", (w: any) =>
      labelled(
        w
          .updateTable(tables.jobs)
          .set(claimSet(slotted))
          .where(sql<boolean>`${sql.ref("id")} = any(array(select ${sql.ref("picked.id")} from ${sql.table("picked")}))`)
          .returningAll(),
        "claim",
      ),
    )
    .selectFrom("done")
    .select(sql<boolean>`false`.as(HANDED))
    .selectAll("done")
    .unionAll((eb: any) => eb.selectFrom("claimed").select(sql<boolean>`true`.as(HANDED)).selectAll("claimed"));
}
