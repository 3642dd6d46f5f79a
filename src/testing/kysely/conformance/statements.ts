import assert from "node:assert/strict";
import { Docket } from "../../../client/docket.ts";
import type { KyselyConformanceCase } from "../harness.ts";
import { StatementCounter } from "../statement-counter.ts";
import { eventually } from "../../conformance/helpers.ts";

/** Statements (BEGIN and COMMIT included) a worker may send per job while it drains a backlog of unkeyed jobs. */
export const STATEMENTS_PER_JOB_BOUND = 2;

/**
 * A count, not a timing: a worker's claims and outcome writes are batched,
 * so in steady state the statements it sends per job stay under one bound
 * whatever its batch size (concurrency 10 and 50).
 */
export const statementCases: KyselyConformanceCase[] = [
  {
    name: "statements › a worker draining a backlog sends fewer than 2 statements per job, at concurrency 10 and 50 alike",
    slow: true,
    async run(t) {
      const perJob: number[] = [];
      for (const concurrency of [10, 50]) {
        const counter = new StatementCounter();
        const adapter = await t.connect({ instrument: { wrapDialect: (d) => counter.wrap(d) } });
        const d = new Docket({ adapter, retry: { baseMs: 5, jitter: 0 } });
        const jobs = 600;
        await new Docket({ adapter: t.adapter }).enqueueMany(Array.from({ length: jobs }, (_, i) => ({ task: `n${concurrency}`, payload: i })));
        let done = 0;
        let atLast = -1;
        const w = d.worker({
          concurrency,
          logger: null,
          handlers: { [`n${concurrency}`]: () => undefined },
          onEvent: (e) => {
            if (e.type === "succeeded" && ++done === jobs) atLast = counter.statements;
          },
        });
        counter.reset();
        await w.start();
        await eventually(async () => atLast >= 0, 30_000, `${jobs} jobs drained at concurrency ${concurrency}`);
        await w.stop();
        perJob.push(atLast / jobs);
      }
      const [c10, c50] = perJob as [number, number];
      assert.ok(c10 < STATEMENTS_PER_JOB_BOUND, `concurrency 10: ${c10.toFixed(2)} statements per job (bound ${STATEMENTS_PER_JOB_BOUND})`);
      assert.ok(c50 < STATEMENTS_PER_JOB_BOUND, `concurrency 50: ${c50.toFixed(2)} statements per job (bound ${STATEMENTS_PER_JOB_BOUND})`);
      console.log(`statements per job: concurrency 10 → ${c10.toFixed(2)}, concurrency 50 → ${c50.toFixed(2)}`);
    },
  },
];
