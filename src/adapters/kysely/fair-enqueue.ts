/**
 * The common fair enqueue as ONE statement, where the engine runs a
 * data-modifying WITH (PostgreSQL): one job whose only control is its
 * fairness key, of a queue the store knows fair (and prioritized, if the
 * job's priority is not 0). The statement reads the queue's clock, upserts
 * the key's row advancing its last tag by the job's step (which locks the
 * row until the statement commits), and inserts the job with that tag: the
 * tags of `storeFairKeys` (fairness.ts), without a transaction's round
 * trips. Where the engine can, it also announces the job on commit.
 */
import { sql } from "kysely";
import type { NewJob } from "../../core/adapter.ts";
import { AdapterError } from "../../core/errors.ts";
import { FAIR_UNIT, IMPLICIT_FAIR_KEY, fairTags } from "../../core/fairness.ts";
import type { JobRecord } from "../../core/job.ts";
import type { AnyDb, Engine } from "./engine.ts";
import type { StoreContext } from "./context.ts";
import { compiledOnce, Slot } from "./compiled.ts";
import { labelled } from "./labels.ts";
import { rowToRecord, type JobRow } from "./row.ts";

/** Whether `job` (alone in its call) takes `insertOneFair`. */
export function fairInOneStatement(ctx: StoreContext, job: NewJob): boolean {
  if (!ctx.engine.capabilities.arrays || !job.fairness || job.concurrency || job.idempotencyKey || job.rateLimit || job.debounce) return false;
  return ctx.fairQueues.fair.has(job.queue) && (job.priority === 0 || ctx.fairQueues.prioritized.has(job.queue));
}

/** Stores `row` (the values `rowsOf` made of `job`) with its tag, in one statement; see the module comment. */
export async function insertOneFair(ctx: StoreContext, db: AnyDb, row: Record<string, unknown>, job: NewJob, notice?: Engine["statementNotice"]): Promise<JobRecord[]> {
  const { tables } = ctx;
  const columns = Object.keys(row).filter((c) => c !== "fair_tag");
  const build = () => {
    const q = new Slot("queue");
    const ready = ctx.db
      .selectFrom(tables.jobs)
      .select(sql`min(fair_tag)`.as("m"))
      .where("queue", "=", q)
      .where("state", "=", "ready")
      .where("fair_tag", "is not", null);
    const top = ctx.db.selectFrom(tables.fairKeys).select(sql`max(served)`.as("m")).where("queue", "=", q);
    // The queue's clock (core fairClock) plus the job's step: the row's last tag for a new key.
    const clock = sql`greatest(0, coalesce((${ready}) - ${sql.lit(FAIR_UNIT + 1)}, (${top}), 0))`;
    const advanced = ctx.db
      .insertInto(tables.fairKeys)
      .values({ queue: q, name: new Slot(" key"), weight: new Slot(" weight"), served: sql`${clock} + ${new Slot(" step")}`, used: new Slot(" step"), active: 1 })
      .onConflict((oc) =>
        oc.columns(["queue", "name"]).doUpdateSet({
          weight: sql`excluded.weight`,
          served: sql`greatest(${sql.ref(`${tables.fairKeys}.served`)} + excluded.used, excluded.served)`,
          active: 1,
        }),
      )
      .returning("served");
    const values = Object.fromEntries(columns.map((c) => [c, new Slot(c)]));
    const insert = ctx.db
      .with("fair_key", () => advanced)
      .insertInto(tables.jobs)
      .values({ ...values, fair_tag: sql`(select served from fair_key)` })
      .returningAll();
    if (!notice) return labelled(insert, "enqueue");
    return labelled(
      ctx.db
        .with("fair_key", () => advanced)
        .with("inserted", () => ctx.db.insertInto(tables.jobs).values({ ...values, fair_tag: sql`(select served from fair_key)` }).returningAll())
        .selectFrom("inserted")
        .selectAll()
        .select(notice.expression(new Slot(" notice")).as("announced")),
      "enqueue",
    );
  };
  const key = `insert-fair:${notice ? "announced:" : ""}${columns.join(",")}`;
  const step = fairTags(0, 0, [job.fairness!.weight]).last;
  const values: Record<string, unknown> = { ...row, " key": job.fairness!.key ?? IMPLICIT_FAIR_KEY, " weight": job.fairness!.weight, " step": step };
  if (notice) values[" notice"] = notice.payload({ queue: job.queue, due: false });
  const rows = (await db.executeQuery(compiledOnce(ctx.statements, key, build, values, ctx.engine.prepare))).rows as JobRow[];
  if (rows.length !== 1) throw new AdapterError(`${ctx.engine.name}: inserted ${rows.length} of 1 jobs`);
  return rows.map(rowToRecord);
}
