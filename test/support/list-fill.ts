/** The job browser's data set (test/list-plans.test.ts, bench/list-pages.ts). */

/**
 * `rows` jobs as a busy PostgreSQL store holds them: 90% succeeded, 6%
 * dead (with an error), 3% ready (only in queues q0–q9), 1% scheduled, in
 * 20 queues and 50 tasks, 1% under one of 100 concurrency keys; and ten
 * succeeded jobs of a rare queue and task. Statements of PostgreSQL's own
 * SQL with `{jobs}` for the table (a test's or a benchmark's setup, not
 * docket's API).
 */
export function listFill(rows: number): string[] {
  return [
    `INSERT INTO {jobs} (task, queue, payload, state, priority, run_at, attempt, max_attempts, created_at, updated_at, finished_at, last_error, concurrency_key)
  SELECT 't' || (h % 50), CASE WHEN s = 'ready' THEN 'q' || (h % 10) ELSE 'q' || (h % 20) END, '{}', s, 0, 1700000000000 + g,
    CASE WHEN s IN ('succeeded', 'dead') THEN 1 ELSE 0 END, 3, 1700000000000 + g, 1700000000000 + g,
    CASE WHEN s IN ('succeeded', 'dead') THEN 1700000000000 + g END,
    CASE WHEN s = 'dead' THEN 'Error: card declined #' || g END,
    CASE WHEN h % 100 = 7 AND s IN ('succeeded', 'dead') THEN 'account-' || (h % 100000 / 1000) END
  FROM (SELECT g, hashint4(g) & 2147483647 AS h,
          CASE WHEN g % 100 < 90 THEN 'succeeded' WHEN g % 100 < 96 THEN 'dead' WHEN g % 100 < 99 THEN 'ready' ELSE 'scheduled' END AS s
        FROM generate_series(1, ${rows}) g) x`,
    `INSERT INTO {jobs} (task, queue, payload, state, priority, run_at, attempt, max_attempts, created_at, updated_at, finished_at)
  SELECT 'trare', 'qrare', '{}', 'succeeded', 0, 1, 1, 3, 1, 1, 1 FROM generate_series(1, 10)`,
  ];
}

