import type { Dialect } from "kysely";
import { tapDialect } from "./tapped-driver.ts";

/**
 * Counts what an adapter sends to its database: every statement, and
 * transaction control (BEGIN, COMMIT, ROLLBACK) whether the driver issues it
 * or the adapter does as SQL. Install with `instrument: { wrapDialect: (d) => counter.wrap(d) }`.
 * It never changes a statement or its timing beyond the count.
 */
export class StatementCounter {
  statements = 0;
  commits = 0;

  reset(): void {
    this.statements = 0;
    this.commits = 0;
  }

  wrap(dialect: Dialect): Dialect {
    return tapDialect(dialect, { query: (sql) => this.count(sql), control: (kind) => this.count(kind) });
  }

  /** Called for each statement sent. */
  count(sql: string): void {
    this.statements++;
    if (/^\s*commit\b/i.test(sql)) this.commits++;
  }
}
